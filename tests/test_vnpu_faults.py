"""Faults on the virtual NPU, with real parts: hexbuild's DSP runtime under its qemu-hexagon (made
by hexbuild into the cache), its stand-in libcdsprpc.so, a skel that goes wrong on purpose
(tests/vnpu/fault_skel.c, built as the SDK builds a skel) and, through the CLI, the real 0.3.28
build's llama-completion under qemu-aarch64 on a ``qemu+npu:`` target.

- A skel that faults: the session's calls end with AEE_EINTERRUPTED at once (no hang), the DSP
  process's one line names the module+offset, hexbuild explains it and names the function.
- Ctrl-C while the DSP hangs in the skel: exit 130, and nothing hexbuild started is left.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.infra.qemu_npu import ROOT, hexbuild_env
from tests.infra.vnpu_host import AEE_EINTERRUPTED, run_host

VNPU = Path(__file__).parent / "vnpu"


@pytest.fixture(scope="module")
def fault_skel(vnpu_env) -> Path:
    """tests/vnpu/fault_skel.c as a v73 skel, named as llama.cpp's (libggml-htp-v73.so)."""
    return vnpu_env.skel(VNPU / "fault_skel.c", "libggml-htp-v73.so")


def vnpu_lines(text: str) -> list[str]:
    """The virtual NPU's failure lines: not its trace, not what it does not model, not the
    library's account of a session (opened, bytes on HTP buffers)."""
    return [ln for ln in text.splitlines() if ln.startswith("hexbuild-vnpu:") and "trace:" not in ln
            and "not modelled" not in ln and not re.match(r"hexbuild-vnpu: HTP\d+: ", ln)]


# One session through the stand-in's C API, as llama.cpp drives it: open, a queue, a buffer, start
# (the skel imports the queue), one op batch written, its answer read.
SESSION = """
import resource, struct
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))  # a shell with ulimit -c unlimited
e_open, h = host.open("file:///libggml-htp-v73.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0")
qe, q, qid = host.queue(3)
p, fd = host.alloc(1 << 16)
e_map = host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 1 << 16, FASTRPC_MAP_FD))
e_start = host.invoke(h, 2, [struct.pack("<IIQIIQ", 0, 0, qid, 1, 0, 64 << 20)], [])[0]
w = host.write(q, [(fd, 0, 64)], struct.pack("<6I", 1, 0, 0, 0, 0, 0))
t0 = time.monotonic()
r = host.read(q)[0]
print(json.dumps([e_open, qe, e_map, e_start, w, r, time.monotonic() - t0, host.invoke(h, 3, [], [])[0]]))
"""


def test_a_fault_in_an_op_batch_ends_the_session_with_an_error_and_one_line(vnpu_parts, fault_skel, tmp_path):
    """The skel faults in its packet callback: the host's waiting read returns AEE_EINTERRUPTED at
    once, and so does every later call of the session; the DSP side's one line names the module
    and offset (fault_skel_op_batch), the library's names the signal, explain reads the first as the
    cause, and no core file lands in the working directory (the program's: the install)."""
    from hexbuild.artifacts.inspect.addr2line import crash_offsets, resolve
    from hexbuild.results.fastrpc_errors import explain_log

    env = {"HEXBUILD_VNPU_QEMU": str(vnpu_parts.qemu), "HEXBUILD_VNPU_RUNTIME": str(vnpu_parts.runtime),
           "ADSP_LIBRARY_PATH": str(fault_skel.parent), "FAULT_SKEL": "batch"}
    code = SESSION.replace("import resource", f"os.chdir({str(tmp_path)!r})\nimport resource")
    p = run_host(vnpu_parts.host_lib_dir("x86_64") / "libcdsprpc.so", code, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    e_open, qe, e_map, e_start, w, r, waited, stop = json.loads(p.stdout.strip().splitlines()[-1])
    assert (e_open, qe, e_map, e_start, w) == (0, 0, 0, 0, 0), p.stderr
    assert r == stop == AEE_EINTERRUPTED and waited < 30, (r, waited, p.stderr)
    lines = vnpu_lines(p.stderr)
    assert len(lines) == 2, p.stderr
    assert re.match(r"hexbuild-vnpu: the DSP faulted: SIGSEGV \(address 0x00000000\) at pc 0x[0-9a-f]{8}, "
                    r"libggml-htp-v73\.so\+0x[0-9a-f]+ \(thread \d+\)$", lines[0]), lines
    assert re.match(r"hexbuild-vnpu: the DSP process of session 0 \(pid \d+\) died: Segmentation fault \(signal 11\)$",
                    lines[1]), lines
    (site,) = crash_offsets(p.stderr)
    assert resolve(fault_skel, [site.offset])[0].function == "fault_skel_op_batch"
    found = explain_log(p.stderr.splitlines())
    assert found is not None and found.kind == "vnpu-dsp-fault" and "AEE_EINTERRUPTED" in found.cause
    assert not list(tmp_path.iterdir()), "a core file of the emulated DSP was written"


# -- through the CLI, on a qemu+npu: target ------------------------------------------------------
@pytest.fixture
def faulting_install(qemu_npu_install, fault_skel):
    """The install with its v73 skel replaced by the fault skel (put back afterwards)."""
    skel = qemu_npu_install / "lib" / "libggml-htp-v73.so"
    saved = skel.with_name(skel.name + ".real")
    shutil.copy2(skel, saved)
    shutil.copyfile(fault_skel, skel)
    try:
        yield qemu_npu_install
    finally:
        os.replace(saved, skel)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from tests.infra.tiny_model import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("vnpu-faults-model") / "tiny.gguf")


def descendants(pid: int) -> dict[int, str]:
    """{pid: cmdline} of every process below ``pid`` (by the parent chain in /proc)."""
    parents = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parents[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in out:
                try:
                    out[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    out[child] = "?"
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def run_watching(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str, dict[int, str]]:
    """hexbuild ARGV in a process of its own, with every process seen below it while it ran."""
    p = subprocess.Popen([sys.executable, "-m", "hexbuild", *argv], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: dict[int, str] = {}
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                out, err = p.communicate(timeout=0.2)
                return p.returncode, out, err, seen
            except subprocess.TimeoutExpired:
                seen.update(descendants(p.pid))
                assert time.monotonic() < deadline, f"{argv} did not finish within {timeout} s"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_skel_that_faults_mid_run_is_one_line_naming_its_function(faulting_install, tiny, vnpu_cache, docker_host,
                                                                    tmp_path):
    """`hexbuild run completion` on qemu+npu: whose skel faults in its first op batch: the program
    ends (llama.cpp aborts on the failed queue read) instead of waiting, hexbuild explains the
    DSP's line as explain would on a phone and names the skel's function, and nothing is left."""
    env = hexbuild_env(vnpu_cache, docker_host, FAULT_SKEL="batch")
    rc, out, err, seen = run_watching(["--json", "run", "completion", "--target", f"qemu+npu:{faulting_install}",
                                       "--model", str(tiny), "--results-dir", str(tmp_path / "results"), "--",
                                       "-n", "4", "-p", "hello"], env, timeout=900)
    assert rc not in (0, 1, 2, 3), err[-3000:]  # the program's own failure (abort: 134), passed on
    doc = json.loads(out)
    crash = doc["dsp_crash"]
    assert crash and crash[0]["lib"] == "libggml-htp-v73.so" and crash[0]["function"] == "fault_skel_op_batch", crash
    assert doc["diagnosis"]["kind"] == "vnpu-dsp-fault", doc["diagnosis"]
    said = [ln for ln in err.splitlines() if "warning: the DSP crashed at" in ln]
    assert len(said) == 1 and "(fault_skel_op_batch+0x" in said[0], err[-3000:]
    assert f"--addr2line {crash[0]['offset']:#x} --lib libggml-htp-v73.so" in said[0]
    time.sleep(1)
    left = {q: cmd for q, cmd in seen.items() if alive(q)}
    assert not left, f"left running: {left}"


def test_ctrl_c_while_the_dsp_hangs_leaves_nothing_running(faulting_install, tiny, vnpu_cache, docker_host,
                                                           vnpu_parts, tmp_path):
    """The skel never returns from start: the run waits on the DSP. SIGINT to hexbuild alone (not
    its process group: the program and the emulators are out of the terminal's reach then): exit
    130 in one line, and qemu-aarch64 and qemu-hexagon, both started under it, are gone."""
    env = hexbuild_env(vnpu_cache, docker_host, FAULT_SKEL="loop")
    p = subprocess.Popen([sys.executable, "-m", "hexbuild", "run", "completion", "--target",
                          f"qemu+npu:{faulting_install}", "--model", str(tiny), "--results-dir",
                          str(tmp_path / "results"), "--", "-n", "4", "-p", "hello"],
                         env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    started: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 600
        while not any(str(vnpu_parts.runtime) in cmd for cmd in started.values()):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "no DSP process started"
            time.sleep(0.5)
            started = descendants(p.pid)
        time.sleep(2)  # the session's start INVOKE is under way, and spinning
        started = descendants(p.pid)
        assert any("qemu-aarch64" in cmd for cmd in started.values()), started
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err[-3000:]
    errors = [ln for ln in err.splitlines() if ln.startswith("hexbuild: error:")]
    assert len(errors) == 1 and errors[0].startswith("hexbuild: error: interrupted"), err[-3000:]
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while [q for q in started if alive(q)] and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {q: started[q] for q in started if alive(q)}
    assert not left, f"left running: {left}"
