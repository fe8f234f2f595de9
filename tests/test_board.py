"""The virtual Linux board (tests/infra/board.py: sshd into a bullseye arm64 root filesystem,
programs run by qemu-aarch64 through binfmt_misc) and glibc compatibility over ssh://: a package
linked against glibc 2.36 is refused by deploy on the 2.31 board, and runs there with
--bundle-runtime, through the ssh:// target code used for real boards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hexbuild.targets import parse_target
from tests.infra.board import BINFMT
from tests.infra.runner_tools import decode_echo

SYSROOT = "/usr/aarch64-linux-gnu"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch, virtual_board):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)
    for k, v in virtual_board.env.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def pkg_236(tmp_path, argv_echo_aarch64) -> Path:
    """A Linux package built against glibc 2.36 (Debian's cross gcc): needs GLIBC_2.34."""
    root = tmp_path / "pkg" / "llama.cpp"
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    for name in ("llama-completion", "test-backend-ops"):
        shutil.copy(argv_echo_aarch64, root / "bin" / name)
    # an AArch64 ELF file in the Hexagon host library's place: an NPU package, so --ndev writes scripts
    shutil.copy(argv_echo_aarch64, root / "lib" / "libggml-hexagon.so")
    (root / "manifest.json").write_text(json.dumps({"os": "linux"}))
    return root


def test_sessions_run_inside_the_arm64_root_filesystem(virtual_board):
    with parse_target(virtual_board.spec, virtual_board.settings) as t:
        got = t.capture(["sh", "-c", "uname -m; cat /etc/debian_version; getconf GNU_LIBC_VERSION"])
        assert got.rc == 0, got.err
        machine, debian, libc = got.out.split("\n")[:3]
        assert machine == "aarch64" and debian.startswith("11.") and libc == "glibc 2.31"
        assert t.glibc_version() == virtual_board.glibc == "2.31"
        info = t.probe("~/llama.cpp")
        assert info.abi == "aarch64" and info.state == "ready"
        t.write_file("/tmp/hello", b"from sftp")
    assert virtual_board.path("/tmp/hello").read_bytes() == b"from sftp"  # sftp is chrooted too


def test_binfmt_entry_is_ours_and_flagged_F(virtual_board):
    ours = [p for p in BINFMT.iterdir() if p.name.startswith("hexbuild-test-")]
    assert ours, "no hexbuild binfmt entry while the board runs"
    text = ours[0].read_text()
    assert "enabled" in text and "flags: F" in text and "qemu-aarch64" in text


def test_a_newer_glibc_package_is_refused_before_the_first_byte(cli, virtual_board, pkg_236):
    r = cli("--json", "deploy", str(pkg_236), "--target", virtual_board.spec, "--dest", "/opt/refused/llama.cpp")
    assert r.rc == 7, r.err
    res = r.json[0]
    assert res["status"] == "failed" and res["bytes_pushed"] == 0
    assert "needs glibc 2.34" in res["error"] and "has glibc 2.31" in res["error"]
    assert "--bundle-runtime" in res["hint"]
    assert not virtual_board.path("/opt/refused").exists()


def test_with_bundle_runtime_the_package_runs_on_the_older_board(cli, tmp_path, virtual_board, pkg_236):
    dest = "/opt/bundled/llama.cpp"
    r = cli("--json", "deploy", str(pkg_236), "--target", virtual_board.spec, "--dest", dest, "--bundle-runtime",
            "--ndev", "1")
    assert r.rc == 0, r.err
    res = r.json[0]
    assert res["glibc"] == {"target": "2.31", "package": "2.34"}
    # a minimal board has no zstd: its libc and loader went over SFTP, raw
    assert res["files_compressed"] == 0 and res["wire_bytes"] == res["bytes_pushed"]
    runtime = virtual_board.path(dest) / "runtime"
    assert {"ld-linux-aarch64.so.1", "libc.so.6"} <= {p.name for p in runtime.iterdir()}
    manifest = json.loads((virtual_board.path(dest) / ".hexbuild" / "manifest.json").read_text())
    assert manifest["runtime"]["loader"] == "runtime/ld-linux-aarch64.so.1" and manifest["runtime"]["glibc"] == "2.36"

    # without the bundled loader the board's own glibc refuses the program, for real
    with parse_target(virtual_board.spec, virtual_board.settings) as t:
        direct = t.capture([f"{dest}/bin/llama-completion"])
        assert direct.rc != 0 and "GLIBC_2.34" in direct.err and "not found" in direct.err

    r = cli("--json", "run", "completion", "-t", virtual_board.spec, "--dest", dest,
            "--results-dir", str(tmp_path / "res"), "--", "-n", "16", "a b", "$(id)")
    assert r.rc == 0, r.err
    got = decode_echo(Path(r.json["log"]).read_bytes())
    assert r.json["argv"][:3] == [f"{dest}/runtime/ld-linux-aarch64.so.1", "--library-path",
                                  f"{dest}/lib:{dest}/runtime"]
    assert got["argv"][0] == "./bin/llama-completion" and got["argv"][-4:] == ["-n", "16", "a b", "$(id)"]
    assert got["cwd"].startswith("/opt/bundled/.llama.cpp.hexbuild-")  # the live release <dest> points at

    # the launch script deploy wrote starts the program through the same loader
    with parse_target(virtual_board.spec, virtual_board.settings) as t:
        script = t.capture(["sh", f"{dest}/scripts/run-completion.sh", "-n", "4"])
        assert script.rc == 0, script.err
        assert decode_echo(script.out)["argv"][-2:] == ["-n", "4"]
