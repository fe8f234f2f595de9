"""``local:DIR`` runs the package's programs natively: an AArch64 package on a machine of another
architecture is refused by ``run`` in one line naming qemu: (exit 2) and noted by ``deploy``,
rather than an ``OSError: Exec format error`` traceback. Genuine AArch64 ELF files
(tests/elf_factory.py)."""

from __future__ import annotations

import os
import platform

import pytest

from tests import elf_factory as ef

pytestmark = pytest.mark.skipif(platform.machine() in ("aarch64", "arm64"),
                                reason="the package's AArch64 programs are this machine's own")


@pytest.fixture
def installed(tmp_path, cli):
    pkg = ef.make_package(tmp_path / "build", os="linux", htp=[])
    dest = tmp_path / "local" / "llama.cpp"
    r = cli("deploy", str(pkg), "--target", f"local:{dest}", "--json")
    assert r.rc == 0, r.err
    return dest, r


def one_error(err: str) -> str:
    errs = [ln for ln in err.splitlines() if ln.startswith("hexbuild: error:")]
    assert len(errs) == 1, err
    return errs[0]


def test_deploy_to_local_says_the_package_is_of_another_architecture(installed):
    dest, r = installed
    (res,) = r.json
    assert res["status"] == "ok"
    note = [w for w in res["warnings"] if "AArch64" in w]
    assert len(note) == 1 and f"qemu:{dest}" in note[0] and platform.machine().replace("_", "-") in note[0]
    assert sum("AArch64" in ln for ln in r.err.splitlines()) == 1  # one line on stderr too


@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_run_on_local_refuses_a_program_of_another_architecture(installed, cli, tmp_path, verbose):
    dest, _ = installed
    results = tmp_path / "results"
    r = cli(*verbose, "run", "cli", "--target", f"local:{dest}", "--results-dir", str(results), "--", "--version")
    assert r.rc == 2, r.err
    line = one_error(r.err)
    assert "llama-cli is an AArch64 program" in line and "this machine is" in line
    assert f"--target qemu:{dest}" in r.err
    assert ("Traceback" in r.err) == bool(verbose)  # -v shows where an error came from, as for any error
    assert not results.exists()  # refused before anything ran or was written


def test_a_file_this_machine_cannot_execute_is_one_line_too(installed, cli, tmp_path):
    dest, _ = installed
    junk = dest / "bin" / "not-a-program"
    junk.write_bytes(os.urandom(64).replace(b"#", b"x"))
    junk.chmod(0o755)
    r = cli("run", "tool", "--target", f"local:{dest}", "--results-dir", str(tmp_path / "results"),
            "--", str(junk))
    assert r.rc == 2, r.err
    assert "cannot start" in one_error(r.err) and "Traceback" not in r.err
