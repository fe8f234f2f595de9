"""hexbuild's stand-in libcdsprpc.so with the real DSP side: the virtual NPU's DSP runtime under
hexbuild's qemu-hexagon, loading the real v73 skel (libggml-htp-v73.so) of a real build.

- Through ctypes (x86-64): a session of the real skel driven call by call as llama.cpp's host
  library drives it (htp_iface_start with a queue, an op batch through the queue, stop, close),
  and what happens when the DSP process is killed under a waiting reader.
- End to end: the unchanged AArch64 llama-completion and libggml-hexagon.so of that build under
  qemu-aarch64 with the AArch64 build of the library, --device HTP0, a tiny model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.infra.vnpu_host import AEE_EINTERRUPTED, run_host

SYSROOT = Path("/usr/aarch64-linux-gnu")


@pytest.fixture
def env(vnpu_real_dsp, vnpu_hexagon_package):
    return {**vnpu_real_dsp, "ADSP_LIBRARY_PATH": str(vnpu_hexagon_package / "lib")}


def run(lib, code, env, **kw):
    p = run_host(lib, code, env=env, **kw)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def failure_lines(text: str) -> list[str]:
    """The virtual NPU's failure lines: its lines but the trace (HEXBUILD_VNPU_LOG=1, both sides),
    the notes about what it does not model (power, DCVS, PMU) and the library's account of each
    session (``HTPn: session opened ...``, ``HTPn: N bytes on HTP buffers``)."""
    return [ln for ln in text.splitlines() if ln.startswith("hexbuild-vnpu:")
            and not ln.startswith("hexbuild-vnpu: trace: ") and "not modelled" not in ln
            and not re.match(r"hexbuild-vnpu: HTP\d+: ", ln)]


# htp_iface.idl through the toolchain double's qaic: method 2 start(uint32 sess_id, uint64 queue_id,
# uint32 n_hvx, uint32 use_hmx, uint64 max_vmem) in one 32-byte primary input; 3 stop(); 4 mmap(fd,
# size); 5 munmap(fd). htp-ops.h: htp_opbatch_req/rsp are six uint32 each.
SESSION = """
import struct
URI = "file:///libggml-htp-v73.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0"
e_open, h = host.open(URI)
qe, q, qid = host.queue(3)
p, fd = host.alloc(1 << 16)
e_map = host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 1 << 16, FASTRPC_MAP_FD))
start = struct.pack("<IIQIIQ", 0, 0, qid, 1, 0, 64 << 20)
e_start = host.invoke(h, 2, [start], [])[0]

def batch(batch_id, timeout=120_000_000):
    req = struct.pack("<6I", batch_id, 0, 0, 0, 0, 0)
    w = host.write(q, [(fd, 4096, 64)], req)
    r, bufs, msg = host.read(q, timeout=timeout)
    return [w, r, [[b[1], b[2], b[3] - p] for b in bufs], list(struct.unpack("<6I", msg)) if len(msg) == 24 else msg.hex()]
"""


def test_real_skel_session(vnpu_host_libs, env):
    out, err = run(vnpu_host_libs["x86_64"], SESSION + """
b1, b2 = batch(7), batch(8)
e_stop = host.invoke(h, 3, [], [])[0]
print(json.dumps([e_open, qe, e_map, e_start, b1, b2, e_stop, host.code(host.lib.dspqueue_close(q)),
                  host.code(host.lib.fastrpc_munmap(3, fd, p, 1 << 16)), host.close(h)]))
""", env, timeout=600)
    e_open, qe, e_map, e_start, b1, b2, e_stop, qclose, unmap, close = out
    assert (e_open, qe, e_map, e_start) == (0, 0, 0, 0), err
    # the skel's response names the same block, the host sees it at its own address
    assert b1 == [0, 0, [[4096, 64, 4096]], [7, 1, 0, 0, 0, 0]], err  # HTP_STATUS_OK
    assert b2[1] == 0 and b2[3][:2] == [8, 1]
    assert (e_stop, qclose, unmap, close) == (0, 0, 0, 0), err
    assert not failure_lines(err), err


def test_real_dsp_process_killed(vnpu_host_libs, env):
    """The DSP process killed while the host waits on the queue: the read returns AEE_EINTERRUPTED
    at once, with one line naming the signal; nothing hangs."""
    out, err = run(vnpu_host_libs["x86_64"], SESSION + """
def parent(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None
kids = [int(d) for d in os.listdir("/proc") if d.isdigit() and parent(d) == os.getpid()]
res = {}
t = threading.Thread(target=lambda: res.setdefault("r", host.read(q)[0])); t.start()
time.sleep(0.5)
for k in kids:
    os.kill(k, 9)
t.join(30)
print(json.dumps([e_start, len(kids), res.get("r"), host.invoke(h, 3, [], [])[0], host.close(h)]))
""", env, timeout=600)
    e_start, n_kids, r, stop, close = out
    assert e_start == 0 and n_kids == 1
    assert r == stop == AEE_EINTERRUPTED
    assert close == 0
    lines = failure_lines(err)
    assert len(lines) == 1 and "Killed (signal 9)" in lines[0], lines


def test_real_skel_not_found(vnpu_host_libs, env):
    out, err = run(vnpu_host_libs["x86_64"], """
e, h = host.open("file:///libggml-htp-v99.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0")
print(json.dumps([e]))
""", env, timeout=300)
    assert out[0] == 0x80000406  # AEE_EUNABLETOLOAD, raised on the DSP, as FastRPC's loader says it


def completion(pkg: Path, lib_dir: Path | None, env: dict[str, str], model: Path, *devices: str):
    """llama-completion of the package under qemu-aarch64, greedy, 8 tokens; lib_dir None: no
    libcdsprpc.so at all (the backend has no device, the CPU computes)."""
    libs = f"{pkg / 'lib'}" + (f":{lib_dir}" if lib_dir else "")
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_VNPU_")}, **env,
            "LD_LIBRARY_PATH": libs}
    cmd = ["qemu-aarch64", "-L", str(SYSROOT), str(pkg / "bin" / "llama-completion"), "-m", str(model),
           "-p", "hello world", "-n", "8", *devices, "-no-cnv", "-t", "2", "--ctx-size", "256",
           "--temp", "0", "--seed", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=1800)


needs_aarch64 = pytest.mark.skipif(not SYSROOT.is_dir(), reason=f"no AArch64 runtime at {SYSROOT}")


@pytest.fixture
def aarch64_lib(vnpu_host_libs) -> Path:
    if "aarch64" not in vnpu_host_libs:
        pytest.skip("no AArch64 compiler to build the library with")
    return vnpu_host_libs["aarch64"].parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from tests.infra.tiny_model import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("vnpu-model") / "tiny.gguf")


@needs_aarch64
@pytest.mark.parametrize("ndev", [1, 2])
def test_llama_completion_on_the_virtual_npu(aarch64_lib, env, vnpu_hexagon_package, tiny, ndev):
    """The unchanged host library of a real build, under qemu-aarch64, opens an HTP session of the
    real skel through the library, puts the weights on HTP buffers, sends its op batches through
    the queue and completes: the same greedy text as the CPU alone. (0.3.28 makes its sessions while
    llama-completion parses its arguments, before -v or -lv can take effect, so the backend's INFO
    line "HTP0 new session" is never shown: the library's own trace shows the session instead.)
    Two devices: two sessions, each its own DSP process, the layers split between them."""
    pkg = vnpu_hexagon_package
    devices = ",".join(f"HTP{i}" for i in range(ndev))
    p = completion(pkg, aarch64_lib, {**env, "HEXBUILD_VNPU_LOG": "1", "GGML_HEXAGON_NDEV": str(ndev)}, tiny,
                   "--device", devices, "-ngl", "99", "-lv", "4")  # the model buffer lines are INFO
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-4000:]
    for i in range(ndev):
        assert re.search(rf"trace: open file:///libggml-htp-v73\.so\?htp_iface_skel_handle_invoke&_modver=1\.0"
                         rf"&_dom=cdsp&_session={i}: handle 0x[0-9a-f]+ \(session {i}", log), log[-4000:]
        assert re.search(rf"HTP{i}-REPACK model buffer size", log), log[-4000:]
    assert len(set(re.findall(r"trace: session (\d+): DSP process (\d+)", log))) == ndev
    assert re.search(r"HTP0 KV buffer size", log), log[-4000:]
    to_dsp = len(re.findall(r"trace: session 0 > type 8 ", log))
    from_dsp = len(re.findall(r"trace: session 0 < type 0x9 ", log))
    assert to_dsp > 0 and from_dsp == to_dsp, (to_dsp, from_dsp)  # every op batch answered
    from hexbuild.results.fastrpc_errors import explain_log

    assert explain_log(log.splitlines()) is None and " E ggml-hex:" not in log, log[-4000:]
    assert not failure_lines(log), failure_lines(log)
    cpu = completion(pkg, None, {}, tiny)
    assert cpu.returncode == 0, cpu.stderr[-4000:]
    assert p.stdout.strip() == cpu.stdout.strip() and p.stdout.strip().startswith("hello world")


@needs_aarch64
def test_llama_completion_without_the_dsp_side(aarch64_lib, vnpu_hexagon_package, tiny, tmp_path):
    """No DSP side configured: the session fails at once with AEE_ECONNREFUSED and one line of the
    library's saying what is missing, and hexbuild explain names that line."""
    from hexbuild.results.fastrpc_errors import explain_log

    env = {"ADSP_LIBRARY_PATH": str(vnpu_hexagon_package / "lib")}
    p = completion(vnpu_hexagon_package, aarch64_lib, env, tiny, "--device", "HTP0", "-ngl", "99")
    log = p.stdout + p.stderr
    assert p.returncode != 0
    lines = failure_lines(log)
    assert lines == ["hexbuild-vnpu: cannot start the DSP process: HEXBUILD_VNPU_QEMU is not set "
                     "(the path of qemu-hexagon)"], log[-4000:]
    assert "ggml-hex: failed to open session 0 : error 0x72" in log
    e = explain_log(log.splitlines())
    assert e is not None and e.kind == "vnpu-launch" and "HEXBUILD_VNPU_QEMU" in e.fix
