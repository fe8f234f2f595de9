"""hexbuild.artifacts on genuine ELF files built with clang-19 (tests/elf_factory.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from hexbuild.artifacts import (NotElf, build_manifest, default_name, hexagon_arch, parse_htp_versions, read_elf,
                                system_libs, verify_package, write_manifest, write_package)
from hexbuild.artifacts.manifest import scan
from hexbuild.errors import PackageFailed, UsageError
from tests import elf_factory as ef


def by(report, file, check):
    found = [c for c in report.checks if c.file == file and c.check == check]
    assert found, f"no {check} check for {file}: {[c.to_json() for c in report.checks]}"
    return found[0]


def statuses(report):
    return {(c.file, c.check): c.status for c in report.checks if c.status != "ok"}


@pytest.fixture
def android_pkg(tmp_path):
    return ef.make_package(tmp_path / "a", os="android", htp=["v68", "v69", "v73"])


@pytest.fixture
def linux_pkg(tmp_path):
    return ef.make_package(tmp_path / "l", os="linux", htp=["v73"])


# -- ELF reading ---------------------------------------------------------------------------------

@pytest.mark.parametrize("flags,arch", [(0x68, "v68"), (0x69, "v69"), (0x73, "v73"), (0x75, "v75"), (0x79, "v79"),
                                        (0x81, "v81"), (0x8067, "v67t"), (0x4, "v5"), (0x0, None), (0x7A, None)])
def test_hexagon_arch_from_e_flags(flags, arch):
    assert hexagon_arch(flags) == arch


@pytest.mark.parametrize("version", ["v68", "v69", "v73"])
def test_clang_hexagon_e_flags_name_the_version(tmp_path, version):
    info = read_elf(ef.hexagon_so(tmp_path / "x.so", version), ("htp_iface_skel_handle_invoke", "op_matmul"))
    assert (info.machine, info.bits, info.kind, info.arch) == ("QDSP6", 32, "DYN", version)
    assert info.e_flags & 0xFFF == int(version[1:], 16)
    assert info.symbols == {"htp_iface_skel_handle_invoke": "exported", "op_matmul": "exported"}


def test_symbol_states(tmp_path):
    so = ef.hexagon_so(tmp_path / "x.so", "v73", exports=["other"], hidden=["op_matmul"])
    info = read_elf(so, ("op_matmul", "htp_iface_skel_handle_invoke", "other"))
    assert info.symbols == {"op_matmul": "hidden", "htp_iface_skel_handle_invoke": "absent", "other": "exported"}


def test_aarch64_program_and_library(tmp_path):
    exe = read_elf(ef.aarch64_exe(tmp_path / "p", os="android", needed=["libllama.so", "libc.so"]))
    assert (exe.machine, exe.bits, exe.kind, exe.e_type) == ("AArch64", 64, "EXEC", "ET_DYN")
    assert exe.pie and exe.interpreter == "/system/bin/linker64" and exe.needed == ("libllama.so", "libc.so")
    assert exe.summary() == {"machine": "AArch64", "arch": None, "type": "EXEC"}
    static_pos = read_elf(ef.aarch64_exe(tmp_path / "q", os="linux", pie=False))
    assert (static_pos.e_type, static_pos.kind, static_pos.pie) == ("ET_EXEC", "EXEC", False)
    lib = read_elf(ef.aarch64_so(tmp_path / "libx.so.1", os="linux", needed=["libc.so.6"]))
    assert (lib.kind, lib.soname, lib.needed, lib.interpreter) == ("DYN", "libx.so.1", ("libc.so.6",), None)


def test_not_elf(tmp_path):
    text = tmp_path / "t"
    text.write_text("#!/bin/sh\n")
    with pytest.raises(NotElf):
        read_elf(text)
    truncated = tmp_path / "trunc.so"
    truncated.write_bytes(ef.hexagon_so(tmp_path / "h.so").read_bytes()[:40])
    with pytest.raises(NotElf):
        read_elf(truncated)


# -- HTP version lists ---------------------------------------------------------------------------

def test_parse_htp_versions():
    assert parse_htp_versions(["v79,73", "V81", " v73 "]) == ["v73", "v79", "v81"]
    assert parse_htp_versions([]) == []
    for bad in (["v7x"], ["hexagon"], ["v7"], ["v73;v79"]):
        with pytest.raises(UsageError):
            parse_htp_versions(bad)


def test_system_lib_lists():
    android, linux = system_libs("android"), system_libs("linux")
    assert android.interpreter == "/system/bin/linker64" and linux.interpreter == "/lib/ld-linux-aarch64.so.1"
    assert {"libc.so", "liblog.so", "libOpenCL.so", "libcdsprpc.so"} <= android.libraries
    assert "libc++_shared.so" not in android.libraries and "libc++_shared.so" in android.hints
    assert {"libc.so.6", "libstdc++.so.6", "ld-linux-aarch64.so.1", "libOpenCL.so.1"} <= linux.libraries


# -- verify ---------------------------------------------------------------------------------------

def test_good_packages_pass(android_pkg, linux_pkg):
    report = verify_package(android_pkg, os="android")
    assert report.ok and report.failures == 0 and report.warnings == 0, statuses(report)
    assert report.htp_versions == ["v68", "v69", "v73"]
    assert by(report, "lib/libggml-htp-v69.so", "arch").detail == "e_flags 0x69 -> v69"
    assert by(report, "bin/convert_hf_to_gguf.py", "format").status == "ok"
    assert "script" in by(report, "bin/convert_hf_to_gguf.py", "format").detail
    linux = verify_package(linux_pkg, os="linux", htp_versions=["v73"])
    assert linux.ok, statuses(linux)
    assert by(linux, "lib/libllama.so", "symlink").detail == "-> libllama.so.0"
    data = linux.to_json()
    assert json.loads(json.dumps(data)) == data
    assert set(data) >= {"ok", "package", "os", "htp_versions", "checks", "warnings", "failures"}
    assert set(data["checks"][0]) == {"file", "check", "status", "detail"}


def test_arch_must_match_file_name(android_pkg):
    lib = android_pkg / "lib"
    shutil.copyfile(lib / "libggml-htp-v73.so", lib / "libggml-htp-v75.so")
    (lib / "libggml-htp-v73.so").unlink()
    report = verify_package(android_pkg, os="android")
    assert not report.ok
    check = by(report, "lib/libggml-htp-v75.so", "arch")
    assert check.status == "fail" and "0x73" in check.detail and "v75" in check.detail
    assert statuses(report) == {("lib/libggml-htp-v75.so", "arch"): "fail"}


@pytest.mark.parametrize("make", ["x86_64", "hexagon"])
def test_wrong_machine_in_bin(android_pkg, make):
    exe = android_pkg / "bin" / "llama-cli"
    if make == "x86_64":
        ef.x86_64_exe(exe)
    else:
        ef.hexagon_so(exe, "v73", mode=0o755)
    report = verify_package(android_pkg, os="android")
    check = by(report, "bin/llama-cli", "format")
    assert check.status == "fail" and ("x86-64" if make == "x86_64" else "QDSP6") in check.detail
    assert statuses(report) == {("bin/llama-cli", "format"): "fail"}


def test_wrong_machine_in_lib(android_pkg):
    ef.x86_64_so(android_pkg / "lib" / "libggml-cpu.so")
    ef.aarch64_so(android_pkg / "lib" / "libggml-htp-v68.so", os="android")
    report = verify_package(android_pkg, os="android")
    assert by(report, "lib/libggml-cpu.so", "format").status == "fail"
    assert "expected a Hexagon" in by(report, "lib/libggml-htp-v68.so", "format").detail
    (android_pkg / "lib" / "libggml-cpu.so").write_text("INPUT(-lfoo)\n")
    assert "not an ELF" in by(verify_package(android_pkg, os="android"), "lib/libggml-cpu.so", "format").detail


@pytest.mark.parametrize("exports,hidden,expect", [
    (["op_matmul"], [], "not defined"),
    (["op_matmul"], ["htp_iface_skel_handle_invoke"], "hidden"),
])
def test_skel_symbol_must_be_exported(android_pkg, exports, hidden, expect):
    ef.hexagon_so(android_pkg / "lib" / "libggml-htp-v69.so", "v69", exports=exports, hidden=hidden)
    report = verify_package(android_pkg, os="android")
    check = by(report, "lib/libggml-htp-v69.so", "skel symbol")
    assert check.status == "fail" and expect in check.detail
    assert report.failures == 1


def test_hidden_matmul_is_a_warning(android_pkg):
    ef.hexagon_so(android_pkg / "lib" / "libggml-htp-v73.so", "v73", hidden=["op_matmul"],
                  exports=["htp_iface_skel_handle_invoke"])
    report = verify_package(android_pkg, os="android")
    assert report.ok and report.warnings == 1
    check = by(report, "lib/libggml-htp-v73.so", "matmul symbol")
    assert check.status == "warn" and "hidden" in check.detail


def test_unresolved_needed(android_pkg):
    ef.aarch64_so(android_pkg / "lib" / "libllama.so", os="android",
                  needed=["libggml.so", "libc++_shared.so", "libfoo.so", "libc.so"])
    report = verify_package(android_pkg, os="android")
    check = by(report, "lib/libllama.so", "needed")
    assert check.status == "fail"
    assert "libfoo.so" in check.detail and "libc++_shared.so (not a system library on Android" in check.detail
    assert "libggml.so" not in check.detail and "libc.so" not in check.detail  # resolved ones are not listed
    # Packaging the library resolves it.
    ef.aarch64_so(android_pkg / "lib" / "libc++_shared.so", os="android", needed=["libc.so"])
    ef.aarch64_so(android_pkg / "lib" / "libfoo.so", os="android")
    assert verify_package(android_pkg, os="android").ok


def test_needed_of_programs_resolve_per_os(linux_pkg):
    report = verify_package(linux_pkg, os="android")  # a Linux build checked for Android
    assert not report.ok
    assert by(report, "bin/llama-cli", "interpreter").status == "fail"
    assert "libc.so.6" in by(report, "lib/libggml-base.so.0.9.4", "needed").detail


def test_expected_htp_versions(android_pkg):
    report = verify_package(android_pkg, os="android", htp_versions=["v68", "v69", "v73", "v79"])
    assert statuses(report) == {("lib/libggml-htp-v79.so", "present"): "fail"}
    report = verify_package(android_pkg, os="android", htp_versions=["v73"])
    assert report.ok and report.warnings == 2
    assert by(report, "lib/libggml-htp-v68.so", "expected").status == "warn"
    for f in (android_pkg / "lib").glob("libggml-htp-*.so"):
        f.unlink()
    report = verify_package(android_pkg, os="android")
    assert statuses(report) == {("lib/libggml-htp-v*.so", "present"): "fail"}


def test_missing_host_library(android_pkg):
    (android_pkg / "lib" / "libggml-hexagon.so").unlink()
    report = verify_package(android_pkg, os="android")
    assert by(report, "lib/libggml-hexagon.so", "present").status == "fail"
    # libggml.so needs it too
    assert "libggml-hexagon.so" in by(report, "lib/libggml.so", "needed").detail


def test_interpreters(android_pkg, tmp_path):
    ef.aarch64_exe(android_pkg / "bin" / "llama-bench", os="android", interpreter="/lib/ld-linux-aarch64.so.1")
    ef.aarch64_exe(android_pkg / "bin" / "test-backend-ops", os="android", pie=False)
    ef.aarch64_exe(android_pkg / "bin" / "static-tool", os="android", interpreter=None, pie=False)
    report = verify_package(android_pkg, os="android")
    bench = by(report, "bin/llama-bench", "interpreter")
    assert bench.status == "fail" and "/system/bin/linker64" in bench.detail and "ld-linux" in bench.detail
    assert "PIE" in by(report, "bin/test-backend-ops", "interpreter").detail
    linux = ef.make_package(tmp_path / "lx", os="linux", htp=["v73"])
    ef.aarch64_exe(linux / "bin" / "llama-cli", os="linux", pie=False)  # non-PIE is fine on Linux
    ef.aarch64_exe(linux / "bin" / "llama-bench", os="android", needed=["libc.so.6"])
    report = verify_package(linux, os="linux")
    assert statuses(report) == {("bin/llama-bench", "interpreter"): "fail"}


def test_symlinks_and_layout(android_pkg):
    lib = android_pkg / "lib"
    (lib / "libdangling.so").symlink_to("libnothere.so.1")
    (lib / "libescape.so").symlink_to("/etc/hostname")
    (android_pkg / "bin" / "llama").symlink_to("llama-cli")
    report = verify_package(android_pkg, os="android")
    assert "dangling" in by(report, "lib/libdangling.so", "symlink").detail
    assert "outside" in by(report, "lib/libescape.so", "symlink").detail
    assert by(report, "bin/llama", "symlink").status == "ok"
    shutil.rmtree(android_pkg / "bin")
    shutil.rmtree(lib)
    report = verify_package(android_pkg, os="android")
    assert by(report, "lib/", "present").status == "fail" and by(report, "bin/", "present").status == "warn"


def test_bad_arguments(tmp_path, android_pkg):
    with pytest.raises(UsageError, match="not found"):
        verify_package(tmp_path / "nope", os="android")
    with pytest.raises(UsageError, match="unknown OS"):
        verify_package(android_pkg, os="windows")
    with pytest.raises(UsageError, match="unknown HTP version"):
        verify_package(android_pkg, os="android", htp_versions=["73a"])


# -- manifest --------------------------------------------------------------------------------------

def test_manifest_records(linux_pkg):
    m = build_manifest(linux_pkg)
    assert m["schema"] == 1 and m["os"] is None and m["llama_cpp"] == {"revision": None}
    assert m["image"] == {"reference": None, "digest": None} and m["preset"] is None and m["build_type"] is None
    assert m["htp_versions"] == ["v73"]
    files = {f["path"]: f for f in m["files"]}
    assert [f["path"] for f in m["files"]] == sorted(files)
    assert "manifest.json" not in files and not any(p.endswith("/") for p in files)
    skel = files["lib/libggml-htp-v73.so"]
    assert skel["elf"] == {"machine": "QDSP6", "arch": "v73", "type": "DYN"} and skel["mode"] == "0644"
    data = (linux_pkg / "lib/libggml-htp-v73.so").read_bytes()
    assert skel["sha256"] == hashlib.sha256(data).hexdigest() and skel["size"] == len(data)
    assert files["bin/llama-cli"]["elf"] == {"machine": "AArch64", "arch": None, "type": "EXEC"}
    assert files["bin/llama-cli"]["mode"] == "0755"
    assert files["bin/convert_hf_to_gguf.py"]["elf"] is None and files["include/llama.h"]["mode"] == "0644"
    link = files["lib/libllama.so"]
    target = files["lib/libllama.so.0.9.4"]
    assert link["symlink"] == "libllama.so.0" and link["sha256"] == target["sha256"] and link["elf"] == target["elf"]
    assert "time" not in json.dumps(m)


def test_manifest_metadata_kept(linux_pkg):
    meta = {"os": "linux", "llama_cpp": {"revision": "1fd6dfe9f", "describe": "b9633"},
            "image": {"reference": "ghcr.io/snapdragon-toolchain/arm64-linux:v0.7", "digest": "sha256:ab"},
            "preset": "arm64-linux-snapdragon-release", "build_type": "release", "htp_versions": ["v73"],
            "cmake_args": ["-DGGML_OPENCL=ON"], "files": ["ignored"], "schema": 99}
    written = write_manifest(linux_pkg, meta)
    on_disk = json.loads((linux_pkg / "manifest.json").read_text())
    assert on_disk == written and written["schema"] == 1
    assert written["llama_cpp"]["describe"] == "b9633" and written["cmake_args"] == ["-DGGML_OPENCL=ON"]
    assert "manifest.json" not in {f["path"] for f in written["files"]}
    assert list(written)[:9] == ["schema", "hexbuild_version", "os", "llama_cpp", "image", "preset", "build_type",
                                 "htp_versions", "cmake_args"]
    # A later build_manifest reads the metadata back from PKG/manifest.json and ignores itself.
    assert build_manifest(linux_pkg) == written
    os.utime(linux_pkg / "bin" / "llama-cli", (1, 1))
    assert build_manifest(linux_pkg) == written


def test_scan_rejects_what_a_tarball_cannot_hold(android_pkg):
    fifo = android_pkg / "bin" / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(PackageFailed, match="not a regular file"):
        scan(android_pkg)
    fifo.unlink()
    for name, target, msg in [("a.so", "/etc/hostname", "outside"), ("b.so", "missing.so", "dangling"),
                              ("c", "../include", "directory")]:
        link = android_pkg / "lib" / name
        link.symlink_to(target)
        with pytest.raises(PackageFailed, match=msg):
            scan(android_pkg)
        link.unlink()
    with pytest.raises(UsageError):
        scan(android_pkg / "bin" / "llama-cli")


# -- tarball ---------------------------------------------------------------------------------------

def members(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_tarball_is_reproducible(linux_pkg, tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first = write_package(linux_pkg, tmp_path / "out" / "one.tar.gz")
    # Times, owners and permission details that must not leak into the bytes.
    for p in linux_pkg.rglob("*"):
        if not p.is_symlink():
            os.utime(p, (1_700_000_000, 1_700_000_000))
            os.chown(p, 1234, 5678)
    (linux_pkg / "bin" / "llama-cli").chmod(0o700)
    (linux_pkg / "include" / "llama.h").chmod(0o600)
    second = write_package(linux_pkg, tmp_path / "out" / "two.tar.gz")
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256 == hashlib.sha256(first.path.read_bytes()).hexdigest()
    assert first.size == first.path.stat().st_size
    raw = first.path.read_bytes()
    assert raw[:4] == b"\x1f\x8b\x08\x00" and raw[4:8] == b"\0\0\0\0"  # no FNAME flag, mtime 0
    ms = members(first.path)
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" and m.gname == "" for m in ms.values())
    assert list(ms)[0] == "llama.cpp" and all(n == "llama.cpp" or n.startswith("llama.cpp/") for n in ms)
    assert ms["llama.cpp/bin/llama-cli"].mode == 0o755 and ms["llama.cpp/include/llama.h"].mode == 0o644
    assert ms["llama.cpp/lib/libggml-htp-v73.so"].mode == 0o644
    assert ms["llama.cpp/lib/libllama.so"].issym() and ms["llama.cpp/lib/libllama.so"].linkname == "libllama.so.0"
    names = [n for n in ms]
    assert names == ["llama.cpp"] + sorted(names[1:])


def test_source_date_epoch(linux_pkg, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1760000000")
    result = write_package(linux_pkg, tmp_path / "x.tar.gz")
    assert {m.mtime for m in members(result.path).values()} == {1760000000}
    with gzip.open(result.path) as g:
        g.read(1)
    assert result.path.read_bytes()[4:8] == b"\0\0\0\0"  # the gzip header stays at 0
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH"):
        write_package(linux_pkg, tmp_path / "y.tar.gz")
    assert not (tmp_path / "y.tar.gz").exists()


def test_an_interrupted_package_write_leaves_no_part(linux_pkg, tmp_path, monkeypatch):
    """Ctrl-C the moment the part is created (where tempfile.mkstemp's return used to lose its
    name): no partial package, hidden or not."""
    from hexbuild.artifacts import tarball

    real_open = os.open

    def created_then_interrupted(path, flags, mode=0o777, **kw):
        fd = real_open(path, flags, mode, **kw)
        if os.path.basename(path).startswith(".z.tar.gz."):  # the package's part, not a cache's
            os.close(fd)
            raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(tarball.os, "open", created_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_package(linux_pkg, tmp_path / "out" / "z.tar.gz")
    monkeypatch.undo()
    assert list((tmp_path / "out").iterdir()) == []


def test_extracted_tarball_checks_out(android_pkg, tmp_path):
    meta = {"os": "android", "llama_cpp": {"revision": "1fd6dfe9f"}, "preset": "arm64-android-snapdragon-release"}
    (android_pkg / "manifest.json").write_text(json.dumps(meta))  # replaced by the fresh manifest
    result = write_package(android_pkg, tmp_path / "rel.tar.gz")
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["tar", "-xzf", str(result.path), "-C", str(dest)], check=True)
    top = dest / "llama.cpp"
    sums = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=top, capture_output=True, text=True)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    listed = {line.split("  ", 1)[1] for line in (top / "SHA256SUMS").read_text().splitlines()}
    on_disk = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
    assert listed == on_disk - {"SHA256SUMS"}
    assert os.access(top / "bin" / "llama-cli", os.X_OK) and os.access(top / "bin" / "convert_hf_to_gguf.py", os.X_OK)
    assert not os.access(top / "include" / "llama.h", os.X_OK)
    inside = json.loads((top / "manifest.json").read_text())
    assert inside == result.manifest == build_manifest(android_pkg, meta)
    assert inside["llama_cpp"]["revision"] == "1fd6dfe9f" and inside["htp_versions"] == ["v68", "v69", "v73"]
    # What was extracted is the same package: it verifies and its manifest matches.
    assert verify_package(top, os="android").ok
    assert build_manifest(top, meta)["files"] == inside["files"]
    # Tampering is caught by sha256sum.
    (top / "lib" / "libggml-htp-v73.so").write_bytes(b"\x7fELF tampered")
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=top, capture_output=True).returncode != 0


def test_output_rules(android_pkg, tmp_path):
    with pytest.raises(UsageError, match="inside the package"):
        write_package(android_pkg, android_pkg / "self.tar.gz")
    assert not list(android_pkg.glob("*.tar.gz*")) and not list(android_pkg.glob(".*part"))
    (tmp_path / "taken").mkdir()
    with pytest.raises(PackageFailed, match="cannot write"):
        write_package(android_pkg, tmp_path / "taken")  # a directory is in the way
    assert os.listdir(tmp_path / "taken") == [] and not list(tmp_path.glob(".taken*"))
    deep = write_package(android_pkg, tmp_path / "new" / "dir" / "p.tar.gz")
    assert deep.path.is_file() and oct(deep.path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_default_name():
    assert default_name("android", "b9633") == "llama.cpp-android-b9633-hexagon.tar.gz"
    assert default_name("linux", None) == "llama.cpp-linux-unknown-hexagon.tar.gz"
    assert default_name("linux", None, cpu_only=True) == "llama.cpp-linux-unknown-cpu.tar.gz"
    assert default_name("linux", "1fd6dfe9f" + "0" * 31) == "llama.cpp-linux-1fd6dfe9f000-hexagon.tar.gz"
    assert default_name("android", "feature/x y") == "llama.cpp-android-feature_x_y-hexagon.tar.gz"


def test_long_names_stay_reproducible(linux_pkg, tmp_path):
    deep = linux_pkg / "include" / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    (deep / ("f" * 80 + ".h")).write_text("x")
    a = write_package(linux_pkg, tmp_path / "a.tar.gz")
    b = write_package(linux_pkg, tmp_path / "b.tar.gz")
    assert a.path.read_bytes() == b.path.read_bytes()
    with tarfile.open(a.path) as tar:
        f = tar.extractfile(f"llama.cpp/include/{'d' * 60}/{'e' * 60}/{'f' * 80}.h")
        assert f is not None and f.read() == b"x"


# -- parallel gzip ---------------------------------------------------------------------------------

def test_parallel_gzip_is_gzip_and_independent_of_threads_and_write_sizes():
    from hexbuild.artifacts.pgzip import BLOCK, ParallelGzipWriter

    # compressible and incompressible parts, crossing several block boundaries unevenly
    data = (b"llama.cpp hexagon " * 100_000) + os.urandom(BLOCK + 12345) + bytes(BLOCK // 3)
    outputs = set()
    for threads, step in [(1, len(data)), (2, 4096), (4, 1_000_003), (3, 7)]:
        out = io.BytesIO()
        with ParallelGzipWriter(out, threads=threads) as gz:
            if step == 7:  # tiny writes only for a prefix: slow in Python, but must not change the bytes
                gz.write(data[:70]); gz.write(data[70:])
            else:
                for i in range(0, len(data), step):
                    gz.write(data[i:i + step])
        outputs.add(out.getvalue())
    assert len(outputs) == 1
    blob = outputs.pop()
    assert gzip.decompress(blob) == data
    assert blob[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    # within a whisker of single-stream zlib at the same level (the priming keeps the ratio)
    assert len(blob) < len(gzip.compress(data, compresslevel=6, mtime=0)) * 1.01
    assert subprocess.run(["gzip", "-t"], input=blob).returncode == 0


def test_parallel_gzip_empty_and_abort():
    from hexbuild.artifacts.pgzip import ParallelGzipWriter

    out = io.BytesIO()
    ParallelGzipWriter(out).close()
    assert gzip.decompress(out.getvalue()) == b""
    out = io.BytesIO()
    with pytest.raises(RuntimeError):
        with ParallelGzipWriter(out, threads=2) as gz:
            gz.write(os.urandom(3 << 20))
            raise RuntimeError("boom")
    assert len(out.getvalue()) < 3 << 20  # nothing past the failure was finished off


def test_inside_parse_once_a_file_is_parsed_once(tmp_path):
    """verify and the manifest both read every ELF file of a build: inside parse_once() the
    second read is remembered; outside, every read parses."""
    from hexbuild.artifacts import elf

    so = ef.hexagon_so(tmp_path / "x.so", "v73", exports=["other"])
    calls = []
    real = elf._read_elf

    def counting(path, symbols):
        calls.append(symbols)
        return real(path, symbols)

    elf._read_elf = counting
    try:
        with elf.parse_once():
            first = read_elf(so, ("other", "op_matmul"))
            again = read_elf(so)
            named = read_elf(so, ("other",))
            assert read_elf(so, ("htp_iface_skel_handle_invoke",)).symbols == {"htp_iface_skel_handle_invoke": "absent"}
        assert len(calls) == 2
        assert again.symbols == {} and named.symbols == {"other": "exported"} and again.arch == first.arch
        read_elf(so)
        assert len(calls) == 3 and elf._PARSED is None
    finally:
        elf._read_elf = real
