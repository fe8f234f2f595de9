"""`hexbuild inspect LIB --json` (every analysis) against llama.cpp's own
scripts/snapdragon/ggml-hexagon-inspect.py --lib LIB --spills --all (one analysis) on real skels,
measured in one run as medians of alternating pairs.

The skels are the real backend built by the test infrastructure on the toolchain double (open
clang-21, tests/infra/real_hexagon.py): the 0.3.28 tree's libggml-htp-v79.so and the 0.3.24
tree's libggml-htp-v75.so, under the test cache (hexagon-build/llama.cpp-VERSION/pkg-snapdragon);
a missing one is built (a Docker engine of the benchmark's own, minutes; the 0.3.24 tree is
downloaded into the test cache first). --lib adds any other library.

Upstream's script (the 0.3.36 tree in the test cache) runs with wrappers named
hexagon-llvm-objdump/hexagon-llvm-addr2line around the very llvm-objdump hexbuild picks, with the
--mcpu/--mattr hexbuild gives it for that library, so both read the same disassembly.

Per library: the disassembly alone; upstream; hexbuild cold (no report cached: its reports
directory is emptied before each run, the disassembler's probes stay cached as after any first
run); hexbuild warm (the same skel again: the report cache keyed by the library's sha256);
hexbuild's very first run on an empty cache, once; and with --before REV that revision of
hexbuild (installed the same way) in the same alternation. Wall and CPU seconds (the process and its
children), the ratio of each pair, the machine's load. Then the check that nothing changed: the
JSON of every run is compared field by field with the reference analysis (the model and
analysis.py, as inspect ran before the scanner), and with --before REV's output.

Usage: python benchmarks/inspect_skel.py [--runs 7] [--hexbuild wheel|checkout] [--lib PATH]...
                                         [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from wheel import hexbuild_command, installed_hexbuild, revision_tree  # noqa: E402

TEST_CACHE = Path(os.environ.get("HEXBUILD_TEST_CACHE") or Path.home() / ".cache" / "hexbuild-tests")
UPSTREAM = TEST_CACHE / "llama-cpp-python-0.3.36" / "vendor" / "llama.cpp" / "scripts" / "snapdragon" \
    / "ggml-hexagon-inspect.py"
SKELS = (("0.3.28", "v79"), ("0.3.24", "v75"))


def skel(version: str, htp: str) -> Path:
    return TEST_CACHE / "hexagon-build" / f"llama.cpp-{version}" / "pkg-snapdragon" / "lib" / f"libggml-htp-{htp}.so"


def ensure_tree(version: str) -> None:
    dst = TEST_CACHE / f"llama-cpp-python-{version}"
    if (dst / "vendor" / "llama.cpp" / "ggml").is_dir():
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "--no-binary", ":all:", "-d", tmp, f"llama-cpp-python=={version}"], check=True)
        part = dst.with_name(dst.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        subprocess.run(["tar", "-xzf", f"{tmp}/llama_cpp_python-{version}.tar.gz", "-C", str(part),
                        "--strip-components=1"], check=True)
        part.rename(dst)


def build_skels(missing: list[tuple[str, str]]) -> None:
    from tests.infra import real_hexagon
    from tests.infra.docker_engine import engine_for_benchmark

    daemon, host = engine_for_benchmark()
    try:
        for version, htp in missing:
            ensure_tree(version)
            print(f"building the {version} tree's {htp} skel on the toolchain double (minutes) ...", file=sys.stderr)
            htps = real_hexagon.HTP if version == real_hexagon.TREE_VERSION else (htp,)
            real_hexagon.build(host, TEST_CACHE, version=version, htp=htps)
    finally:
        if daemon is not None:
            daemon.stop()


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cp = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cp.returncode != 0:
        sys.exit(f"failed ({cp.returncode}): {' '.join(argv)}\n{cp.stderr.decode(errors='replace')[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, cp.stdout


def wrappers(directory: Path, objdump: str, flags: list[str]) -> None:
    addr2line = shutil.which(os.path.basename(objdump).replace("objdump", "addr2line")) or "llvm-addr2line"
    for name, tool, extra in (("hexagon-llvm-objdump", objdump, " ".join(flags)), ("hexagon-llvm-addr2line", addr2line, "")):
        p = directory / name
        p.write_text(f"#!/bin/sh\nexec {tool} {extra} \"$@\"\n")
        p.chmod(0o755)


def reference(lib: Path) -> list[dict]:
    """Every function's JSON as inspect made it before the scanner: the model, then analysis.py."""
    from hexbuild.artifacts.inspect import find_objdump
    from hexbuild.artifacts.inspect.analysis import analyze
    from hexbuild.artifacts.inspect.elfmeta import plt_names, read_meta
    from hexbuild.artifacts.inspect.model import parse

    tool = find_objdump()
    meta = read_meta(lib)
    flags, _ = tool.flags(meta.arch, lib)
    functions = parse(tool.disassemble(lib, flags))
    plt = plt_names(meta, [p for f in functions if f.section == ".plt" for p in f.packets])
    return [analyze(fn, meta, plt).to_json() for fn in functions if fn.section != ".plt"]


def differences(a, b, path: str = "") -> list[str]:
    """Where two JSON documents differ, field by field (a path per difference)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one" for k in a.keys() ^ b.keys()]
        for k in a.keys() & b.keys():
            out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} entries against {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            name = x.get("name") if isinstance(x, dict) else None
            out += differences(x, y, f"{path}[{name or i}]")
        return out
    return [] if a == b else [f"{path}: {a!r} against {b!r}"]


def fields(doc) -> int:
    if isinstance(doc, dict):
        return sum(fields(v) for v in doc.values())
    if isinstance(doc, list):
        return sum(fields(v) for v in doc)
    return 1


def before_hexbuild(rev: str, how: str, into: Path) -> list[str]:
    """Revision ``rev`` of hexbuild, run as this checkout is (``how``): installed as a wheel, or
    ``python -m hexbuild`` from its tree (not `-m` as such: that would put the working directory,
    perhaps this checkout, first on sys.path)."""
    tree = revision_tree(rev, into)
    if how == "wheel":
        return [str(installed_hexbuild(tree))]
    return [sys.executable, "-c", f"import runpy, sys; sys.path[0] = {str(tree)!r}; "
            "runpy.run_module('hexbuild', run_name='__main__', alter_sys=True)"]


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def measure(lib: Path, args, cmd: list[str], env: dict[str, str], tmp: Path, before: list[str] | None) -> dict:
    from hexbuild.artifacts.inspect import find_objdump
    from hexbuild.artifacts.inspect.elfmeta import read_meta

    tool = find_objdump()
    flags, _ = tool.flags(read_meta(lib).arch, lib)
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrappers(bin_dir, tool.path, flags)
    up_env = dict(env, PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    upstream = [sys.executable, str(UPSTREAM), "--no-docker", "--no-color", "--lib", str(lib), "--spills", "--all"]
    cache = tmp / f"xdg-{lib.name}"
    ours_env = dict(env, XDG_CACHE_HOME=str(cache))
    ours = [*cmd, "-q", "inspect", str(lib), "--json"]
    objdump = [tool.path, "-d", "--no-show-raw-insn", *flags, str(lib)]

    first = timed(ours, ours_env)  # an empty cache: the disassembler probed, the report made
    timed(upstream, up_env)        # the page cache warm for both
    rows: dict[str, list[tuple[float, float]]] = {"objdump": [], "upstream": [], "cold": [], "warm": []}
    outputs = {"first": first[2]}
    reports = cache / "hexbuild" / "inspect" / "reports"
    runs = [("upstream", upstream, up_env), ("cold", ours, ours_env), ("warm", ours, ours_env)]
    if before is not None:  # that revision as it ran: it had no cache
        rows["before"] = []
        runs.append(("before", [*before, "-q", "inspect", str(lib), "--json"], env))
        timed(runs[-1][1], env)
    for i in range(args.runs):
        order = runs if i % 2 == 0 else runs[1:] + runs[:1]
        for name, argv, e in order:
            if name == "cold":
                shutil.rmtree(reports, ignore_errors=True)
            wall, cpu, out = timed(argv, e)
            rows[name].append((wall, cpu))
            if name != "upstream":
                outputs.setdefault(name, out)
        wall, cpu, text = timed(objdump, env)
        rows["objdump"].append((wall, cpu))
    lines = text.count(b"\n")
    result = {"library": str(lib), "bytes": lib.stat().st_size, "lines": lines, "flags": flags, "first": first[:2]}
    for name, samples in rows.items():
        result[name] = (med([w for w, _ in samples]), med([c for _, c in samples]))
    for name in ("cold", "warm", "before"):
        if name in rows:
            result[f"{name}_ratio"] = med([o[0] / u[0] for o, u in zip(rows[name], rows["upstream"])])
    result["outputs"] = outputs
    return result


def check(lib: Path, outputs: dict[str, bytes]) -> list[str]:
    theirs = json.loads(outputs.pop("before")) if "before" in outputs else None
    docs = {name: json.loads(out)["libraries"][0] for name, out in outputs.items()}
    ref = reference(lib)
    notes = []
    for name, doc in docs.items():
        diff = differences(ref, doc["functions"])
        notes.append(f"  {name:6s} run vs the reference analysis: "
                     + ("identical" if not diff else f"{len(diff)} differences, first: {diff[:3]}")
                     + f" ({len(ref)} functions, {fields(ref)} fields)")
    if theirs is not None:
        diff = differences(theirs, json.loads(outputs["cold"]))
        notes.append(f"  cold run vs --before's output (whole document): "
                     + ("identical" if not diff else f"{len(diff)} differences, first: {diff[:3]}")
                     + f" ({fields(theirs)} fields)")
    return notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7, help="alternating pairs per library")
    ap.add_argument("--hexbuild", choices=("wheel", "checkout"), default="wheel")
    ap.add_argument("--lib", type=Path, action="append", default=[], help="another library to measure")
    ap.add_argument("--before", metavar="REV", help="also time this revision (installed the same way) and compare "
                                                    "its output with this checkout's (e.g. main)")
    args = ap.parse_args()
    if not UPSTREAM.is_file():
        sys.exit(f"no upstream script at {UPSTREAM}: run scripts/setup-test-env.sh")
    missing = [(v, h) for v, h in SKELS if not skel(v, h).is_file()]
    if missing:
        build_skels(missing)
    libs = [skel(v, h) for v, h in SKELS] + args.lib
    cmd, env = hexbuild_command(args.hexbuild)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hexbuild-bench-inspect-") as tmp:
        before = before_hexbuild(args.before, args.hexbuild, Path(tmp) / "before") if args.before else None
        results = [measure(lib, args, cmd, env, Path(tmp), before) for lib in libs]
        notes = [check(Path(r["library"]), r.pop("outputs")) for r in results]
    load1 = os.getloadavg()
    print(f"hexbuild: {args.hexbuild} ({' '.join(cmd)}); upstream: {UPSTREAM}")
    print(f"{os.cpu_count()} CPUs, load average {load0[0]:.2f} before, {load1[0]:.2f} after; "
          f"medians of {args.runs} alternating runs; wall s (CPU s, process and children)")
    for r, note in zip(results, notes):
        print(f"\n{r['library']} ({r['bytes'] / 1e6:.2f} MB, {r['lines']:,} lines of disassembly, "
              f"{' '.join(r['flags'])})")
        for name, label in (("objdump", "llvm-objdump -d alone"), ("upstream", "upstream --spills --all"),
                            ("cold", "hexbuild inspect --json, cold"), ("warm", "hexbuild inspect --json, warm"),
                            ("before", f"hexbuild {args.before} (--before)")):
            if name not in r:
                continue
            wall, cpu = r[name]
            extra = f"   {r[name + '_ratio']:.2f}x upstream (median of pair ratios)" if name + "_ratio" in r else ""
            print(f"  {label:32s} {wall:6.3f} s ({cpu:5.3f}){extra}")
        print(f"  {'hexbuild, first run (empty cache)':32s} {r['first'][0]:6.3f} s ({r['first'][1]:5.3f})")
        print("\n".join(note))
    print("\n" + json.dumps([{k: v for k, v in r.items()} for r in results]))


if __name__ == "__main__":
    main()
