"""glibc needs of real AArch64 ELF files (compiled here by Debian's cross gcc/g++ against glibc
2.36) and glibc versions of real systems; `verify --glibc` and the manifest's record."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hexbuild.artifacts import glibc
from hexbuild.artifacts.manifest import build_manifest

SYSROOT = Path("/usr/aarch64-linux-gnu")


def compile_aarch64(tmp: Path, name: str, source: str, *, cxx: bool = False, flags: tuple[str, ...] = ()) -> Path:
    cc = shutil.which("aarch64-linux-gnu-g++" if cxx else "aarch64-linux-gnu-gcc")
    if not cc:
        pytest.fail("the AArch64 cross compiler is missing: run scripts/setup-test-env.sh (g++-aarch64-linux-gnu)")
    src = tmp / (name + (".cc" if cxx else ".c"))
    src.write_text(source)
    out = tmp / name
    subprocess.run([cc, "-O1", *flags, "-o", str(out), str(src)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("glibc-elf")
    return {
        "plain": compile_aarch64(d, "plain", "int main(void) { return 0; }\n"),
        # arc4random is new in glibc 2.36
        "arc4random": compile_aarch64(d, "arc4random", "#include <stdlib.h>\nint main(void) { return (int)(arc4random() & 1); }\n"),
        "cxx": compile_aarch64(d, "cxx", "#include <string>\n#include <iostream>\nint main(int c, char **v) "
                               "{ std::string s(v[0]); std::cout << s.size() << std::endl; try { throw 1; } catch (int) {} return 0; }\n",
                               cxx=True),
        "static": compile_aarch64(d, "static", "int main(void) { return 0; }\n", flags=("-static",)),
        "lib": compile_aarch64(d, "libx.so", "#include <stdlib.h>\nunsigned f(void) { return arc4random(); }\n",
                               flags=("-shared", "-fPIC")),
    }


def test_needs_read_from_gnu_version_r(programs):
    assert glibc.needs(programs["plain"]) == {"GLIBC": "2.34"}  # __libc_start_main@GLIBC_2.34
    assert glibc.needs(programs["arc4random"]) == {"GLIBC": "2.36"}
    assert glibc.needs(programs["lib"]) == {"GLIBC": "2.36"}
    cxx = glibc.needs(programs["cxx"])
    assert cxx["GLIBC"] == "2.34" and glibc.key(cxx["GLIBCXX"]) >= (3, 4, 9) and glibc.key(cxx["CXXABI"]) >= (1, 3)
    assert glibc.needs(programs["static"]) == {}
    assert glibc.needs(Path(__file__)) == {}


def test_versions_compare_numerically_and_too_new_names_files():
    assert glibc.highest(["2.9", "2.17", "2.34"]) == "2.34"
    assert glibc.highest(["3.4.9", "3.4.30", "3.4.29"]) == "3.4.30"
    per = {"bin/a": {"GLIBC": "2.34"}, "lib/b.so": {"GLIBC": "2.17", "GLIBCXX": "3.4.30"}}
    assert glibc.summary(per) == {"GLIBC": "2.34", "GLIBCXX": "3.4.30"}
    assert glibc.too_new(per, "2.31") == {"bin/a": "2.34"}
    assert glibc.too_new(per, "2.36") == {}


@pytest.mark.parametrize("text, version", [
    ("glibc 2.31\n", "2.31"),
    ("ldd (Debian GLIBC 2.31-13+deb11u11) 2.31\nCopyright (C) 2020", "2.31"),
    ("ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35\n", "2.35"),
    ("ld.so (Debian GLIBC 2.36-9+deb12u10) stable release version 2.36.\n", "2.36"),
    ("", None),
])
def test_version_lines_of_getconf_ldd_and_the_loader(text, version):
    assert glibc.parse_version(text) == version


def test_the_version_of_a_real_libc():
    assert glibc.libc_version(SYSROOT / "lib" / "libc.so.6") == "2.36"
    assert glibc.sysroot_version(SYSROOT) == "2.36"


def test_verify_reports_needs_and_fails_an_older_glibc(cli, tmp_path, programs):
    pkg = tmp_path / "pkg"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    shutil.copy(programs["plain"], pkg / "bin" / "llama-completion")
    shutil.copy(programs["cxx"], pkg / "bin" / "llama-cli")
    shutil.copy(programs["lib"], pkg / "lib" / "libx.so")
    r = cli("--json", "verify", str(pkg), "--os", "linux")
    doc = r.json
    assert doc["glibc"]["needs"]["GLIBC"] == "2.36" and "GLIBCXX" in doc["glibc"]["needs"]
    assert doc["glibc"]["files"]["bin/llama-completion"] == {"GLIBC": "2.34"}
    rows = {(c["file"], c["check"]): c for c in doc["checks"]}
    assert rows[("lib/libx.so", "glibc")]["detail"] == "needs GLIBC_2.36"
    r = cli("verify", str(pkg), "--os", "linux", "--glibc", "2.34")
    assert r.rc == 5
    assert "a glibc 2.34 system cannot load 1 file(s): lib/libx.so (GLIBC_2.36)" in r.err
    r = cli("verify", str(pkg), "--os", "linux", "--glibc", "2.31")
    assert r.rc == 5 and "cannot load 3 file(s)" in r.err and "bin/llama-completion (GLIBC_2.34)" in r.err
    assert "--bundle-runtime" in r.err
    assert cli("verify", str(pkg), "--os", "android", "--glibc", "2.31").rc == 2
    assert cli("verify", str(pkg), "--os", "linux", "--glibc", "two").rc == 2


def test_the_manifest_records_a_linux_packages_glibc_needs(tmp_path, programs):
    pkg = tmp_path / "pkg"
    (pkg / "bin").mkdir(parents=True)
    shutil.copy(programs["arc4random"], pkg / "bin" / "llama-completion")
    (pkg / "bin" / "README").write_text("not ELF")
    m = build_manifest(pkg, {"os": "linux"})
    assert m["glibc"] == {"needs": {"GLIBC": "2.36"}, "files": {"bin/llama-completion": {"GLIBC": "2.36"}}}
    assert "glibc" not in build_manifest(pkg, {"os": "android"})
    json.dumps(m)


def test_a_linux_targets_glibc_is_read_with_fallbacks(tmp_path, monkeypatch):
    """The probe script runs in the target's real sh; getconf first, then `ldd --version` when
    getconf is missing or fails (busybox/Yocto images), else None — never an exception."""
    from hexbuild.targets import parse_target

    t = parse_target(f"local:{tmp_path}", None)
    real = subprocess.run(["getconf", "GNU_LIBC_VERSION"], capture_output=True, text=True).stdout.split()[-1]
    assert t.glibc_version() == real
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name in ("sh", "head", "cat"):
        (bin_ / name).symlink_to(shutil.which(name))
    (bin_ / "getconf").write_text("#!/bin/sh\necho 'getconf: unknown variable' >&2; exit 1\n")
    (bin_ / "ldd").write_text("#!/bin/sh\necho 'ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35'\n")
    for p in bin_.iterdir():
        if not p.is_symlink():
            p.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_))
    assert t.glibc_version() == "2.35"
    (bin_ / "ldd").unlink()
    assert t.glibc_version() in (None, real)  # only a loader at /lib/ld-linux-aarch64.so.1 could still answer
