"""qaic for hexbuild's toolchain double: the FastRPC IDL compiler of the Hexagon SDK, written anew.

Reads an interface file (``interface NAME : remote_handle64 { ... };`` with ``struct`` declarations)
and writes, as the SDK's qaic does:

- ``NAME.h``: the structs, ``NAME_URI``, and the C signature of every method with the IDL's own types:
  ``int NAME_METHOD(remote_handle64 _h, <in scalars by value>, <in structs as const T*>,
  <rout scalars and structs as T*>, <sequences as T* + int len>, <strings as char*>)``;
- ``NAME_stub.c`` (host): packs in scalars and structs into one primary input buffer and rout ones
  into one primary output buffer (each field at its natural alignment, a sequence's or rout
  string's length as a uint32 in the primary input), puts every sequence in a buffer of its own,
  and calls ``remote_handle64_invoke`` with ``REMOTE_SCALARS_MAKEX(0, method, nIn, nOut, 0, 0)``;
  ``NAME_open``/``NAME_close`` call ``remote_handle64_open``/``_close``;
- ``NAME_skel.c`` (DSP): ``NAME_skel_handle_invoke`` checks the scalars word and the buffer sizes,
  unpacks, calls the implementation and packs the rout values back. Methods 0 and 1 are open and
  close, the IDL's methods follow from 2, as in FastRPC.

Usage: ``qaic [-o DIR] [-I DIR]... FILE.idl``. Exit 1 with ``qaic: FILE:LINE: message`` on bad input.
"""

from __future__ import annotations

import os
import re
import sys

SCALARS = {  # IDL type -> (C type, size)
    "int8": ("int8", 1), "uint8": ("uint8", 1), "char": ("char", 1), "octet": ("uint8", 1),
    "boolean": ("boolean", 1), "int16": ("int16", 2), "uint16": ("uint16", 2), "short": ("int16", 2),
    "int32": ("int32", 4), "uint32": ("uint32", 4), "long": ("int32", 4), "float": ("float", 4),
    "AEEResult": ("AEEResult", 4), "int64": ("int64", 8), "uint64": ("uint64", 8), "double": ("double", 8),
    "int": ("int32", 4), "unsigned": ("uint32", 4),
}
FIRST_METHOD = 2


class IdlError(Exception):
    pass


class Type:
    def __init__(self, c: str, size: int, align: int, struct: bool = False):
        self.c, self.size, self.align, self.struct = c, size, align, struct


class Param:
    def __init__(self, mode: str, kind: str, type_: Type, name: str):
        self.mode, self.kind, self.type, self.name = mode, kind, type_, name  # kind: scalar|sequence|string


class Method:
    def __init__(self, name: str, params: list[Param]):
        self.name, self.params = name, params


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"^\s*#[^\n]*", "", text, flags=re.M)  # include guards and includes of the SDK's IDL


def _align(off: int, a: int) -> int:
    return (off + a - 1) // a * a


def parse(text: str, where: str) -> tuple[str, dict[str, tuple[Type, list[tuple[Type, str, int]]]], list[Method]]:
    text = _strip(text)
    types: dict[str, Type] = {k: Type(c, s, s) for k, (c, s) in SCALARS.items()}
    structs: dict[str, tuple[Type, list[tuple[Type, str, int]]]] = {}

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for m in re.finditer(r"\bstruct\s+(\w+)\s*\{(.*?)\}\s*;", text, re.S):
        name, body = m.group(1), m.group(2)
        fields, off, align = [], 0, 1
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            fm = re.fullmatch(r"(\w+)\s+(\w+)\s*(?:\[\s*(\d+)\s*\])?", decl)
            if not fm or fm.group(1) not in types:
                raise IdlError(f"{where}:{line_of(m.start())}: struct {name}: cannot read field '{decl}'")
            t, count = types[fm.group(1)], int(fm.group(3) or 1)
            off = _align(off, t.align)
            fields.append((t, fm.group(2), count))
            off += t.size * count
            align = max(align, t.align)
        st = Type(name, _align(off, align), align, struct=True)
        types[name] = st
        structs[name] = (st, fields)

    im = re.search(r"\binterface\s+(\w+)\s*:\s*remote_handle64\s*\{(.*?)\}\s*;", text, re.S)
    if not im:
        raise IdlError(f"{where}: no 'interface NAME : remote_handle64 {{ ... }};'")
    iface, body, base = im.group(1), im.group(2), im.start(2)
    methods = []
    for mm in re.finditer(r"(\w+)\s+(\w+)\s*\(([^)]*)\)\s*;", body):
        if mm.group(1) != "AEEResult":
            raise IdlError(f"{where}:{line_of(base + mm.start())}: method {mm.group(2)} must return AEEResult")
        params = []
        for raw in filter(None, (p.strip() for p in mm.group(3).split(","))):
            pm = re.fullmatch(r"(in|rout|inrout)\s+(?:sequence\s*<\s*(\w+)\s*>|(string)|(\w+))\s+(\w+)", raw)
            if not pm:
                raise IdlError(f"{where}:{line_of(base + mm.start())}: {mm.group(2)}: cannot read parameter '{raw}'")
            mode, seq_t, is_str, scalar_t, pname = pm.groups()
            if mode == "inrout":
                raise IdlError(f"{where}:{line_of(base + mm.start())}: {mm.group(2)}: inrout is not supported")
            tname = seq_t or scalar_t or "char"
            if tname not in types:
                raise IdlError(f"{where}:{line_of(base + mm.start())}: {mm.group(2)}: unknown type '{tname}'")
            kind = "sequence" if seq_t else "string" if is_str else "scalar"
            params.append(Param(mode, kind, types[tname], pname))
        methods.append(Method(mm.group(2), params))
    if not methods:
        raise IdlError(f"{where}: interface {iface} declares no methods")
    return iface, structs, methods


def _signature(iface: str, m: Method) -> str:
    args = ["remote_handle64 _h"]
    for p in m.params:
        t = p.type.c
        if p.kind == "scalar":
            if p.mode == "in":
                args.append(f"const {t}* {p.name}" if p.type.struct else f"{t} {p.name}")
            else:
                args.append(f"{t}* {p.name}")
        elif p.kind == "sequence":
            args += [f"{'const ' if p.mode == 'in' else ''}{t}* {p.name}", f"int {p.name}Len"]
        else:
            args += ([f"const char* {p.name}"] if p.mode == "in" else [f"char* {p.name}", f"int {p.name}Len"])
    return f"int {iface}_{m.name}({', '.join(args)})"


class Layout:
    """Where each value of a method travels: offsets in the primary buffers, buffer indices."""

    def __init__(self, m: Method):
        self.prim_in: list[tuple[str, int, int, str]] = []   # (what, offset, size, param name)
        self.prim_out: list[tuple[str, int, int, str]] = []
        self.in_bufs: list[Param] = []
        self.out_bufs: list[Param] = []
        off_in = off_out = 0
        for p in m.params:
            if p.kind == "scalar":
                if p.mode == "in":
                    off_in = _align(off_in, p.type.align)
                    self.prim_in.append(("value", off_in, p.type.size, p.name))
                    off_in += p.type.size
                else:
                    off_out = _align(off_out, p.type.align)
                    self.prim_out.append(("value", off_out, p.type.size, p.name))
                    off_out += p.type.size
            else:  # the length goes in the primary input, the data in a buffer of its own
                off_in = _align(off_in, 4)
                self.prim_in.append(("len", off_in, 4, p.name))
                off_in += 4
                (self.in_bufs if p.mode == "in" else self.out_bufs).append(p)
        self.in_size, self.out_size = _align(off_in, 8), _align(off_out, 8)
        self.n_in = (1 if self.in_size else 0) + len(self.in_bufs)
        self.n_out = (1 if self.out_size else 0) + len(self.out_bufs)


def _elem(p: Param) -> str:
    return "char" if p.kind == "string" else p.type.c


def header(iface: str, stem: str, structs, methods: list[Method]) -> str:
    guard = f"_{stem.upper()}_H"
    out = [f"/* Generated by qaic (hexbuild toolchain double) from {stem}.idl. Do not edit. */",
           f"#ifndef {guard}", f"#define {guard}", '#include "AEEStdDef.h"', '#include "remote.h"', "",
           "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    for name, (_, fields) in structs.items():
        out.append(f"typedef struct {name} {name};")
        out.append(f"struct {name} {{")
        out += [f"    {t.c} {fname}{f'[{n}]' if n > 1 else ''};" for t, fname, n in fields]
        out += ["};", ""]
    out += [f'#define {iface}_URI "file:///lib{iface}_skel.so?{iface}_skel_handle_invoke&_modver=1.0"',
            f"int {iface}_open(const char* uri, remote_handle64* h);",
            f"int {iface}_close(remote_handle64 h);"]
    for i, m in enumerate(methods):
        out.append(f"#define {iface}_METHOD_{m.name} {FIRST_METHOD + i}")
        out.append(_signature(iface, m) + ";")
    out += [f"int {iface}_skel_handle_invoke(remote_handle64 _h, uint32 _sc, remote_arg* _pra);", "",
            "#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(out)


def stub(iface: str, stem: str, methods: list[Method]) -> str:
    out = [f"/* Generated by qaic (hexbuild toolchain double): host side of {iface}. Do not edit. */",
           f'#include "{stem}.h"', "",
           f"int {iface}_open(const char* uri, remote_handle64* h) {{", "    return remote_handle64_open(uri, h);",
           "}", "", f"int {iface}_close(remote_handle64 h) {{", "    return remote_handle64_close(h);", "}"]
    for i, m in enumerate(methods):
        lay = Layout(m)
        n = lay.n_in + lay.n_out
        out += ["", _signature(iface, m) + " {"]
        out.append(f"    remote_arg _pra[{max(n, 1)}];")
        if lay.in_size:
            out.append(f"    uint64 _primIn[{lay.in_size // 8}] = {{0}};")
        if lay.out_size:
            out.append(f"    uint64 _primROut[{lay.out_size // 8}] = {{0}};")
        for what, off, size, name in lay.prim_in:
            if what == "len":
                p = next(p for p in m.params if p.name == name)
                src = f"(uint32) {name}Len" if not (p.kind == "string" and p.mode == "in") else \
                    f"(uint32) (__builtin_strlen({name}) + 1)"
                out.append(f"    {{ uint32 _len = {src}; __builtin_memcpy((uint8*) _primIn + {off}, &_len, 4); }}")
            else:
                p = next(p for p in m.params if p.name == name)
                ref = name if p.type.struct else f"&{name}"
                out.append(f"    __builtin_memcpy((uint8*) _primIn + {off}, {ref}, {size});")
        k = 0
        if lay.in_size:
            out.append(f"    _pra[{k}].buf.pv = (void*) _primIn; _pra[{k}].buf.nLen = {lay.in_size};")
            k += 1
        for p in lay.in_bufs:
            nbytes = f"(__builtin_strlen({p.name}) + 1)" if p.kind == "string" else f"{p.name}Len * sizeof({_elem(p)})"
            out.append(f"    _pra[{k}].buf.pv = (void*) {p.name}; _pra[{k}].buf.nLen = {nbytes};")
            k += 1
        if lay.out_size:
            out.append(f"    _pra[{k}].buf.pv = (void*) _primROut; _pra[{k}].buf.nLen = {lay.out_size};")
            k += 1
        for p in lay.out_bufs:
            out.append(f"    _pra[{k}].buf.pv = (void*) {p.name}; _pra[{k}].buf.nLen = {p.name}Len * sizeof({_elem(p)});")
            k += 1
        out.append(f"    int _nErr = remote_handle64_invoke(_h, REMOTE_SCALARS_MAKEX(0, {FIRST_METHOD + i}, {lay.n_in}, "
                   f"{lay.n_out}, 0, 0), _pra);")
        for _, off, size, name in lay.prim_out:
            out.append(f"    if (_nErr == 0) __builtin_memcpy({name}, (uint8*) _primROut + {off}, {size});")
        out += ["    return _nErr;", "}"]
    return "\n".join(out) + "\n"


def skel(iface: str, stem: str, methods: list[Method]) -> str:
    out = [f"/* Generated by qaic (hexbuild toolchain double): DSP side of {iface}. Do not edit. */",
           f'#include "{stem}.h"', '#include "AEEStdErr.h"', ""]
    for i, m in enumerate(methods):
        lay = Layout(m)
        out.append(f"static int _skel_{m.name}(remote_handle64 _h, uint32 _sc, remote_arg* _pra) {{")
        out.append(f"    if (REMOTE_SCALARS_INBUFS(_sc) != {lay.n_in} || REMOTE_SCALARS_OUTBUFS(_sc) != {lay.n_out}) "
                   "return AEE_EBADPARM;")
        k, call = 0, []
        lens = {}
        if lay.in_size:
            out.append(f"    if (_pra[{k}].buf.nLen < {lay.in_size}) return AEE_EBADPARM;")
            out.append(f"    const uint8* _primIn = (const uint8*) _pra[{k}].buf.pv;")
            k += 1
        for what, off, size, name in lay.prim_in:
            p = next(p for p in m.params if p.name == name)
            if what == "len":
                out.append(f"    uint32 _{name}Len; __builtin_memcpy(&_{name}Len, _primIn + {off}, 4);")
                lens[name] = f"_{name}Len"
            else:
                out.append(f"    {p.type.c} _{name}; __builtin_memcpy(&_{name}, _primIn + {off}, {size});")
        for p in lay.in_bufs:
            out.append(f"    if (_pra[{k}].buf.nLen < (size_t) {lens[p.name]} * sizeof({_elem(p)})) return AEE_EBADPARM;")
            out.append(f"    const {_elem(p)}* _{p.name} = (const {_elem(p)}*) _pra[{k}].buf.pv;")
            if p.kind == "string":
                out.append(f"    if ({lens[p.name]} == 0 || _{p.name}[{lens[p.name]} - 1] != 0) return AEE_EBADPARM;")
            k += 1
        prim_out_k = None
        if lay.out_size:
            out.append(f"    if (_pra[{k}].buf.nLen < {lay.out_size}) return AEE_EBADPARM;")
            prim_out_k = k
            k += 1
        for p in lay.out_bufs:
            out.append(f"    if (_pra[{k}].buf.nLen < (size_t) {lens[p.name]} * sizeof({_elem(p)})) return AEE_EBADPARM;")
            out.append(f"    {_elem(p)}* _{p.name} = ({_elem(p)}*) _pra[{k}].buf.pv;")
            k += 1
        for p in m.params:
            if p.kind == "scalar" and p.mode == "rout":
                out.append(f"    {p.type.c} _{p.name}; __builtin_memset(&_{p.name}, 0, sizeof(_{p.name}));")
        for p in m.params:
            if p.kind == "scalar":
                call.append(f"&_{p.name}" if p.mode == "rout" or p.type.struct else f"_{p.name}")
            elif p.kind == "sequence" or (p.kind == "string" and p.mode == "rout"):
                call += [f"_{p.name}", f"(int) {lens[p.name]}"]
            else:
                call.append(f"_{p.name}")
        out.append(f"    int _nErr = {iface}_{m.name}(_h{''.join(', ' + c for c in call)});")
        if lay.out_size:
            out.append(f"    uint8* _primROut = (uint8*) _pra[{prim_out_k}].buf.pv;")
            for _, off, size, name in lay.prim_out:
                out.append(f"    __builtin_memcpy(_primROut + {off}, &_{name}, {size});")
        out += ["    return _nErr;", "}", ""]
    out += [f"int {iface}_skel_handle_invoke(remote_handle64 _h, uint32 _sc, remote_arg* _pra) {{",
            "    switch (REMOTE_SCALARS_METHOD(_sc)) {",
            "    case 0: {  /* open: in string uri, rout handle */",
            "        if (REMOTE_SCALARS_INBUFS(_sc) != 1 || REMOTE_SCALARS_OUTBUFS(_sc) != 1) return AEE_EBADPARM;",
            "        if (_pra[1].buf.nLen < sizeof(remote_handle64)) return AEE_EBADPARM;",
            f"        return {iface}_open((const char*) _pra[0].buf.pv, (remote_handle64*) _pra[1].buf.pv);",
            "    }",
            f"    case 1: return {iface}_close(_h);"]
    for i, m in enumerate(methods):
        out.append(f"    case {FIRST_METHOD + i}: return _skel_{m.name}(_h, _sc, _pra);")
    out += ["    default: return AEE_EUNSUPPORTED;", "    }", "}", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    out_dir, idl = ".", None
    it = iter(argv)
    for a in it:
        if a == "-o":
            out_dir = next(it, ".")
        elif a.startswith("-o") and len(a) > 2:
            out_dir = a[2:]
        elif a == "-I":
            next(it, None)
        elif a.startswith("-"):
            continue  # the SDK's qaic takes more options (-mdll, -I...); they change nothing here
        else:
            idl = a
    if not idl:
        print("usage: qaic [-o DIR] [-I DIR]... FILE.idl", file=sys.stderr)
        return 2
    try:
        text = open(idl, encoding="utf-8").read()
        iface, structs, methods = parse(text, idl)
    except OSError as e:
        print(f"qaic: {idl}: {e.strerror}", file=sys.stderr)
        return 1
    except IdlError as e:
        print(f"qaic: {e}", file=sys.stderr)
        return 1
    stem = os.path.splitext(os.path.basename(idl))[0]
    os.makedirs(out_dir, exist_ok=True)
    for name, content in ((f"{stem}.h", header(iface, stem, structs, methods)),
                          (f"{stem}_stub.c", stub(iface, stem, methods)),
                          (f"{stem}_skel.c", skel(iface, stem, methods))):
        tmp = os.path.join(out_dir, f".{name}.{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(tmp, os.path.join(out_dir, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
