"""``local:DIR`` runs the package's programs natively: an AArch64 package on a machine of another
architecture is refused by ``run`` in one line naming qemu: (exit 2) and noted by ``deploy``,
rather than an ``OSError: Exec format error`` traceback. Genuine AArch64 ELF files
(tests/elf_factory.py). A program it runs is stopped with everything it started (a timeout,
Ctrl-C, what it left holding its output), by its process group."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import pytest

from tests import elf_factory as ef

foreign = pytest.mark.skipif(platform.machine() in ("aarch64", "arm64"),
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


@foreign
def test_deploy_to_local_says_the_package_is_of_another_architecture(installed):
    dest, r = installed
    (res,) = r.json
    assert res["status"] == "ok"
    note = [w for w in res["warnings"] if "AArch64" in w]
    assert len(note) == 1 and f"qemu:{dest}" in note[0] and platform.machine().replace("_", "-") in note[0]
    assert sum("AArch64" in ln for ln in r.err.splitlines()) == 1  # one line on stderr too


@pytest.mark.parametrize("verbose", [[], ["-v"]])
@foreign
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


@foreign
def test_a_file_this_machine_cannot_execute_is_one_line_too(installed, cli, tmp_path):
    dest, _ = installed
    junk = dest / "bin" / "not-a-program"
    junk.write_bytes(os.urandom(64).replace(b"#", b"x"))
    junk.chmod(0o755)
    r = cli("run", "tool", "--target", f"local:{dest}", "--results-dir", str(tmp_path / "results"),
            "--", str(junk))
    assert r.rc == 2, r.err
    assert "cannot start" in one_error(r.err) and "Traceback" not in r.err


# -- stopping what a program started ------------------------------------------------------------
# The program starts a grandchild (as a qemu+npu run's library starts its DSP processes) and says
# its PID; the grandchild must not outlive the run, however it ends.
SPAWNS = 'sleep 300 & echo "$!"; wait'


def gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            return True
        time.sleep(0.05)
    return False


def _pids(chunks: list[bytes]) -> list[int]:
    return [int(w) for w in b"".join(chunks).split() if w.isdigit()]


def test_a_timeout_stops_what_the_program_started(tmp_path):
    from hexbuild.errors import RemoteFailed
    from hexbuild.targets.local import LocalTarget

    out: list[bytes] = []
    with pytest.raises(RemoteFailed, match="did not finish within 2s"):
        LocalTarget("local:x", str(tmp_path)).run(["sh", "-c", SPAWNS], timeout=2,
                                                   on_output=lambda stream, data: out.append(data))
    (pid,) = _pids(out)
    assert gone(pid), "the program's child outlived the timeout"


def test_ctrl_c_stops_what_the_program_started(tmp_path):
    """KeyboardInterrupt (how Ctrl-C and SIGTERM reach hexbuild) while the program's output
    streams: the program and its child are stopped before it goes on up."""
    from hexbuild.targets.local import LocalTarget

    out: list[bytes] = []

    def sink(stream, data):
        out.append(data)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LocalTarget("local:x", str(tmp_path)).run(["sh", "-c", SPAWNS], timeout=60, on_output=sink)
    (pid,) = _pids(out)
    assert gone(pid), "the program's child outlived Ctrl-C"


def test_what_an_ended_program_left_holding_its_output_is_stopped(tmp_path):
    """The program exits and its child keeps the output pipe open (a DSP process of a program that
    died without closing its sessions): the run ends a moment later with the program's status,
    and the child with it, instead of waiting for the child."""
    from hexbuild.targets.local import LEFTOVER_GRACE, LocalTarget

    out: list[bytes] = []
    start = time.monotonic()
    rc = LocalTarget("local:x", str(tmp_path)).run(["sh", "-c", 'sleep 300 & echo "$!"; exit 3'], timeout=60,
                                                    on_output=lambda stream, data: out.append(data))
    assert rc == 3 and time.monotonic() - start < LEFTOVER_GRACE + 5
    (pid,) = _pids(out)
    assert gone(pid)
