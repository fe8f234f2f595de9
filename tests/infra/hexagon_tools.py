"""LLVM 21 for Hexagon v68-v79, as a self-contained tool tree taken from a Debian sid root filesystem.

Debian bookworm's LLVM 19 targets Hexagon up to v73; sid's clang-21/lld-21/llvm-21 know v75 and v79
(see the reference on building the real backend). Installing them on a bookworm host would pull
sid's libc, so the tree carries sid's own dynamic loader and libraries and every program runs
through that loader (``ld-linux-x86-64.so.2 --library-path lib --argv0 NAME libexec/PROG``): no sid
package touches the host or the image it is copied into. The loader sits in ``bin/`` beside the
wrappers because clang finds its resource headers (``../lib/clang/21``) and the Hexagon target
directory (``../target``) from the executable's directory, and the kernel reports the loader as the
executable.

Layout (``<cache>/hexagon-tools/<key>/`` and ``hexagon-tools-<key>.tar`` beside it)::

    bin/ld-linux-x86-64.so.2   sid's loader
    bin/clang clang++ ld.lld llvm-objdump llvm-ar llvm-ranlib llvm-nm llvm-objcopy llvm-strip
        llvm-readelf llvm-addr2line llvm-symbolizer python3   (wrappers)
    libexec/                   the programs themselves
    lib/                       the libraries they need, libc included
    lib/clang/21/include/      clang's resource headers (hexagon_protos.h, hvx_hexagon_protos.h, ...)
    lib/python3/               Python's minimal standard library (for the stand-in qaic)

The toolchain double (docker/Dockerfile.toolchain-fixture) copies the tar into the Hexagon SDK's
``tools/HEXAGON_Tools/<version>/Tools``; on the host, scripts/setup-test-env.sh links
``/usr/local/bin/llvm-objdump-21`` to the tree's wrapper so ``hexbuild inspect`` finds it.

``python -m tests.infra.hexagon_tools build [--check]`` (needs root: debootstrap, chroot).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.infra.docker_engine import InfraError, cache_dir

LLVM = "21"
SID_PACKAGES = (f"clang-{LLVM}", f"lld-{LLVM}", f"llvm-{LLVM}", "python3-minimal")
# name in bin/ -> program in libexec/ (the real ELF file under the sid root) and fixed arguments
PROGRAMS = {
    "clang": (f"usr/lib/llvm-{LLVM}/bin/clang", ()),
    "clang++": (f"usr/lib/llvm-{LLVM}/bin/clang", ()),
    "ld.lld": (f"usr/lib/llvm-{LLVM}/bin/lld", ()),
    "llvm-objdump": (f"usr/lib/llvm-{LLVM}/bin/llvm-objdump", ()),
    "llvm-ar": (f"usr/lib/llvm-{LLVM}/bin/llvm-ar", ()),
    "llvm-ranlib": (f"usr/lib/llvm-{LLVM}/bin/llvm-ar", ()),
    "llvm-nm": (f"usr/lib/llvm-{LLVM}/bin/llvm-nm", ()),
    "llvm-objcopy": (f"usr/lib/llvm-{LLVM}/bin/llvm-objcopy", ()),
    "llvm-strip": (f"usr/lib/llvm-{LLVM}/bin/llvm-objcopy", ()),
    "llvm-readelf": (f"usr/lib/llvm-{LLVM}/bin/llvm-readobj", ()),
    "llvm-symbolizer": (f"usr/lib/llvm-{LLVM}/bin/llvm-symbolizer", ()),
    "llvm-addr2line": (f"usr/lib/llvm-{LLVM}/bin/llvm-symbolizer", ()),
    "python3": ("usr/bin/python3", ()),
}
LOADER = "ld-linux-x86-64.so.2"
# Bump when the layout or the wrappers change: it is part of the key.
LAYOUT = "1"

WRAPPER = """#!/bin/sh
# {name}: sid's {prog} run through the tree's own loader and libraries (no host libc involved).
t=$(dirname "$(dirname "$(readlink -f "$0")")")
{env}exec "$t/bin/{loader}" --library-path "$t/lib" --argv0 "$0" "$t/libexec/{prog}" {args}"$@"
"""


def key() -> str:
    h = hashlib.sha256()
    h.update(" ".join(SID_PACKAGES).encode() + b"\0" + LAYOUT.encode() + b"\0")
    h.update(WRAPPER.encode())
    return h.hexdigest()[:12]


def tools_dir(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "hexagon-tools" / key()


def tools_tar(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "hexagon-tools" / f"hexagon-tools-{key()}.tar"


def objdump(cache: Path | None = None) -> Path | None:
    """The tree's llvm-objdump wrapper, when the tree is there."""
    p = tools_dir(cache) / "bin" / "llvm-objdump"
    return p if p.is_file() else None


def debian_uri() -> str:
    """The machine's own Debian mirror, from its apt sources (never written down here)."""
    from hexbuild.toolchain.open_image import debian_mirror

    uri = debian_mirror()
    if not uri:
        raise InfraError("cannot find the Debian mirror in the machine's apt sources (/etc/apt)")
    return uri


def _run(argv: list[str], log: Path, what: str, **kw) -> None:
    with open(log, "ab") as f:
        cp = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
    if cp.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise InfraError(f"{what} failed (exit {cp.returncode}); {log} ends:\n{tail}")


def sid_root(work: Path, log: Path) -> Path:
    """A sid minbase root filesystem with SID_PACKAGES installed (debootstrap + apt in a chroot)."""
    root = work / "sid-root"
    shutil.rmtree(root, ignore_errors=True)
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    _run([debootstrap, "--variant=minbase", "sid", str(root), debian_uri()], log, "debootstrap sid")
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
    # The mirror serves a dated snapshot, so its Release files are past their Valid-Until.
    script = ("export DEBIAN_FRONTEND=noninteractive; apt-get -qq -o Acquire::Check-Valid-Until=false update && "
              "apt-get install -y -qq --no-install-recommends " + " ".join(SID_PACKAGES))
    _run(["chroot", str(root), "/bin/sh", "-c", script], log, "apt-get install in the sid root")
    return root


def _needed(root: Path, programs: list[str]) -> list[str]:
    """Paths (inside root) of every library the programs load, by the root's own ldd."""
    cp = subprocess.run(["chroot", str(root), "ldd", *("/" + p for p in programs)], capture_output=True, text=True)
    if cp.returncode != 0:
        raise InfraError(f"ldd in the sid root failed: {cp.stderr.strip()[-500:]}")
    libs = set()
    for line in cp.stdout.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            libs.add(parts[2].lstrip("/"))
        elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
            pass  # the loader goes to bin/
        elif "not found" in line:
            raise InfraError(f"a library of the sid tools is missing: {line.strip()}")
    return sorted(libs)


def assemble(root: Path, out: Path) -> None:
    """Copy what the tree needs out of the sid root into ``out`` (made anew)."""
    shutil.rmtree(out, ignore_errors=True)
    for d in ("bin", "libexec", "lib"):
        (out / d).mkdir(parents=True)
    progs = sorted({p for p, _ in PROGRAMS.values()})
    for rel in progs:
        src = (root / rel).resolve()
        dst = out / "libexec" / Path(rel).name
        if not dst.exists():
            shutil.copy2(src, dst)
    for rel in _needed(root, progs):
        shutil.copy2((root / rel).resolve(), out / "lib" / Path(rel).name)
    shutil.copy2((root / "usr/lib/x86_64-linux-gnu" / LOADER).resolve(), out / "bin" / LOADER)
    shutil.copytree(root / f"usr/lib/llvm-{LLVM}/lib/clang/{LLVM}/include", out / "lib" / "clang" / LLVM / "include")
    pylib = sorted((root / "usr/lib").glob("python3.*"))
    if not pylib:
        raise InfraError("python3-minimal left no standard library in the sid root")
    shutil.copytree(pylib[-1], out / "lib" / "python3" / "lib" / pylib[-1].name,
                    ignore=shutil.ignore_patterns("__pycache__", "test", "tests", "sitecustomize.py"), symlinks=True)
    for name, (prog, args) in PROGRAMS.items():
        env = 'PYTHONHOME="$t/lib/python3" ' if name == "python3" else ""
        text = WRAPPER.format(name=name, prog=Path(prog).name, loader=LOADER, env=env,
                              args="".join(a + " " for a in args))
        w = out / "bin" / name
        w.write_text(text)
        w.chmod(0o755)
    for p in out.rglob("*"):
        if p.is_file() and not p.is_symlink():
            p.chmod(0o755 if os.access(p, os.X_OK) or p.parent.name in ("bin", "libexec") else 0o644)


def check(tree: Path) -> None:
    """The tree's programs run on this host: clang knows v79 and the objdump decodes Hexagon."""
    cp = subprocess.run([str(tree / "bin" / "clang"), "--target=hexagon", "-mv79", "-mhvx", "-x", "c", "-c",
                         "-o", "/dev/null", "-"], input="int f(int x){return x*3;}\n", capture_output=True,
                        text=True)
    if cp.returncode != 0:
        raise InfraError(f"the sid clang in {tree} does not build v79 code: {cp.stderr.strip()[-500:]}")
    cp = subprocess.run([str(tree / "bin" / "llvm-objdump"), "--version"], capture_output=True, text=True)
    if cp.returncode != 0 or "hexagon" not in cp.stdout:
        raise InfraError(f"the sid llvm-objdump in {tree} does not run or knows no Hexagon: {cp.stderr[-300:]}")


def ensure(cache: Path | None = None) -> Path:
    """The extracted tree (built, or unpacked from its tarball, when missing); returns its directory."""
    cache = cache or cache_dir()
    tree, tar = tools_dir(cache), tools_tar(cache)
    if (tree / ".complete").is_file():
        return tree
    tar.parent.mkdir(parents=True, exist_ok=True)
    part = tree.with_name(tree.name + ".part")
    if not tar.is_file():
        if os.geteuid() != 0:
            raise InfraError(f"{tar} is missing and building it needs root (debootstrap): "
                             "run scripts/setup-test-env.sh")
        log = tar.parent / "build.log"
        log.write_text("")
        work = tar.parent / "work"
        work.mkdir(exist_ok=True)
        try:
            root = sid_root(work, log)
            assemble(root, part)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        check(part)
        with tarfile.open(tar.with_suffix(".tar.part"), "w") as t:
            t.add(part, arcname=".")
        os.replace(tar.with_suffix(".tar.part"), tar)
    else:
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        with tarfile.open(tar) as t:
            t.extractall(part, filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(part)
        check(part)
    (part / ".complete").write_text(key() + "\n")
    shutil.rmtree(tree, ignore_errors=True)
    os.replace(part, tree)
    return tree


def _main(argv: list[str]) -> int:
    if argv not in (["build"], ["build", "--check"]):
        print("usage: python -m tests.infra.hexagon_tools build [--check]", file=sys.stderr)
        return 2
    if "--check" in argv:
        return 0 if (tools_dir() / ".complete").is_file() and tools_tar().is_file() else 1
    from tests.infra.real_build import _lock

    try:
        with _lock(cache_dir() / "hexagon-tools.lock"):
            print(ensure())
    except InfraError as e:
        print(f"hexagon_tools: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
