"""hexbuild's stand-in libcdsprpc.so (hexbuild/dsp/host/), the virtual NPU's host side.

Each test runs its calls in a process of its own (tests/infra/vnpu_host.py: run_host), against the
stand-in DSP process of tests/infra/vnpu_stub_dsp.py, which speaks the same wire protocol as the real
DSP runtime and can crash, hang or misbehave on demand. The real DSP runtime under qemu-hexagon and a
real llama.cpp host library under qemu-aarch64 are in tests/test_vnpu_host_real.py.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import time

import pytest

from tests.infra.vnpu_host import (HOST_SRC, ROOT, AEE_EBADHANDLE, AEE_EBADITEM, AEE_EBADPARM, AEE_ECONNREFUSED, AEE_EEXPIRED,
                                   AEE_EINTERRUPTED, AEE_EINVALIDDOMAIN, AEE_ENOSESSION, AEE_ENOSUCHMAP,
                                   AEE_EUNSUPPORTED, DSP_OFFSET, run_host)

URI = "file:///libggml-htp-v73.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=0"


@pytest.fixture
def lib(vnpu_host_libs):
    return vnpu_host_libs["x86_64"]


@pytest.fixture
def dsp_env(vnpu_stub, tmp_path):
    runtime = tmp_path / "runtime.elf"
    runtime.write_bytes(b"")
    return {"HEXBUILD_VNPU_QEMU": str(vnpu_stub), "HEXBUILD_VNPU_RUNTIME": str(runtime)}


def run(lib, code, env, **kw):
    p = run_host(lib, code, env=env, **kw)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def vnpu_lines(stderr: str) -> list[str]:
    """The library's lines but its account of each session (``HTPn: session opened ...``, ``HTPn:
    N bytes on HTP buffers``), which it says on every run for the dispatch proof."""
    return [ln for ln in stderr.splitlines() if ln.startswith("hexbuild-vnpu:")
            and not re.match(r"hexbuild-vnpu: HTP\d+: ", ln)]


def test_open_invoke_close(lib, dsp_env):
    out, err = run(lib, f"""
e, h = host.open({URI!r})
e2, outs = host.invoke(h, 2, [b"hello, dsp"], [10])
e3, _ = host.invoke(h, 5, [b"x"], [])
print(json.dumps([e, h, e2, outs[0].decode(), e3, host.close(h), host.close(h), host.invoke(h, 2, [b"a"], [1])[0]]))
""", dsp_env)
    e, h, e2, echoed, e3, closed, closed_again, after = out
    assert (e, e2, echoed, closed) == (0, 0, "psd ,olleh", 0)
    assert 0 < h < 1 << 32  # llama.cpp closes through a 32-bit remote_handle
    assert e3 == DSP_OFFSET + AEE_EBADPARM  # the DSP's own status comes back as it is
    assert closed_again == after == AEE_EBADHANDLE
    assert vnpu_lines(err) == []


def test_large_invoke(lib, dsp_env):
    """An INVOKE of a few MiB each way is one packet: the socket's buffers are raised for it."""
    out, err = run(lib, """
data = bytes(range(256)) * (3 << 12)  # 3 MiB
e, h = host.open("file:///l.so?x")
e2, outs = host.invoke(h, 2, [data], [len(data)])
print(json.dumps([e, e2, outs[0] == data[::-1], host.close(h)]))
""", dsp_env)
    assert out == [0, 0, True, 0], err


def test_shared_memory_and_queue(lib, dsp_env):
    """A block the host writes is what the DSP sees, and the other way round; queue packets name
    buffers by fd + offset and come back with the host's own pointer."""
    out, _ = run(lib, """
p, fd = host.alloc(8192)
e, h = host.open("file:///lib.so?x&_dom=cdsp")
m = host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 8192, FASTRPC_MAP_FD))
again = host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 8192, FASTRPC_MAP_FD))
C.memmove(p + 4096, b"\\x01\\x02\\x03", 3)
qe, q, qid = host.queue(3)
w = host.write(q, [(fd, 4096, 3)], b"request")
r, bufs, msg = host.read(q, timeout=5_000_000)
seen = C.string_at(p + 4096, 3)
import struct
poke = host.invoke(h, 6, [struct.pack("<iI", fd, 100) + b"from dsp"], [])[0]
poked = C.string_at(p + 100, 8)
unmapped = host.write(q, [(999, 0, 4)], b"x")
print(json.dumps([m, again, qe, qid, w, r, [list(b[:3]) + [b[3] - p] for b in bufs], msg.decode(),
                  list(seen), poke, poked.decode(), unmapped,
                  host.code(host.lib.dspqueue_close(q)),
                  host.code(host.lib.fastrpc_munmap(3, fd, p, 8192)),
                  host.code(host.lib.fastrpc_munmap(3, fd, p, 8192)), host.close(h)]))
""", dsp_env)
    (m, again, qe, qid, w, r, bufs, msg, seen, poke, poked, unmapped, qclose, unmap, unmap_again, close) = out
    assert (m, qe, w, r, poke, qclose, unmap, close) == (0,) * 8
    assert again == 0x1A  # AEE_EALREADY, as FastRPC
    assert qid >= 1
    assert bufs == [[bufs[0][0], 4096, 3, 4096]]  # fd, offset, size, ptr - base
    assert msg == "tseuqer"
    assert seen == [2, 3, 4]  # the DSP incremented the bytes in place
    assert poked == "from dsp"
    assert unmapped == AEE_ENOSUCHMAP
    assert unmap_again == AEE_ENOSUCHMAP


def test_queue_callbacks(lib, dsp_env):
    """A queue made with callbacks: the packet callback runs on the session's reader thread for each
    packet (and reads it there with dspqueue_read_noblock); the error callback gets
    AEE_EINTERRUPTED when the DSP process dies."""
    out, _ = run(lib, """
CB = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_void_p)
got, errors = [], []
read_noblock = host.lib.dspqueue_read_noblock
read_noblock.argtypes = [C.c_void_p, C.POINTER(C.c_uint32), C.c_uint32, C.POINTER(C.c_uint32),
                         C.POINTER(DspqueueBuffer), C.c_uint32, C.POINTER(C.c_uint32), C.c_char_p]
def on_packet(q, err, ctx):
    f, nb, ml = C.c_uint32(), C.c_uint32(), C.c_uint32()
    msg = C.create_string_buffer(64)
    r = read_noblock(q, C.byref(f), 0, C.byref(nb), None, 64, C.byref(ml), msg)
    got.append([threading.current_thread() is threading.main_thread(), err, host.code(r), msg.raw[:ml.value].decode()])
def on_error(q, err, ctx):
    errors.append(host.code(err))
pcb, ecb = CB(on_packet), CB(on_error)
e, h = host.open("file:///l.so?x")
q = C.c_void_p()
host.lib.dspqueue_create.argtypes = [C.c_int, C.c_uint32, C.c_uint32, C.c_uint32, CB, CB, C.c_void_p, C.POINTER(C.c_void_p)]
ce = host.code(host.lib.dspqueue_create(3, 0, 4096, 4096, pcb, ecb, None, C.byref(q)))
for m in (b"one", b"two"):
    host.write(q.value, [], m)
deadline = time.monotonic() + 10
while len(got) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
empty = host.code(read_noblock(q, None, 0, None, None, 0, None, None))
host.invoke(h, 3, [b"x"], [])
deadline = time.monotonic() + 10
while not errors and time.monotonic() < deadline:  # called from the reader, after the waiters wake
    time.sleep(0.01)
print(json.dumps([ce, got, empty, errors, host.code(host.lib.dspqueue_close(q)), host.close(h)]))
""", dsp_env)
    ce, got, empty, errors, qclose, close = out
    assert ce == 0
    assert got == [[False, 0, 0, "eno"], [False, 0, 0, "owt"]]
    assert empty == 516  # AEE_EWOULDBLOCK: the callback took them
    assert errors == [AEE_EINTERRUPTED]
    assert (qclose, close) == (0, 0)


def test_read_timeout_and_poll(lib, dsp_env):
    out, _ = run(lib, """
e, q, qid = host.queue(3)
t = time.monotonic(); r1 = host.read(q, timeout=200_000)[0]; dt = time.monotonic() - t
r0 = host.read(q, timeout=0)[0]
print(json.dumps([e, r1, round(dt, 2), r0]))
""", dsp_env)
    e, r1, dt, r0 = out
    assert e == 0 and r1 == r0 == AEE_EEXPIRED
    assert 0.15 <= dt < 5


def test_session_control(lib, dsp_env):
    """The requests of llama.cpp's ggml_hexagon_session::allocate, answered as qualcomm/fastrpc does."""
    out, err = run(lib, """
res = []
for i in range(4):
    n = ReserveNewSession(b"cdsp", 4, b"HTP%d" % i, 4)
    res.append([host.session_control(FASTRPC_RESERVE_NEW_SESSION, n), n.effective_domain_id, n.session_id])
buf = C.create_string_buffer(256)
u = GetUri(b"cdsp", 4, 2, b"file:///libggml-htp-v73.so?htp_iface_skel_handle_invoke&_modver=1.0", 68, C.cast(buf, C.c_char_p), 256)
res.append([host.session_control(FASTRPC_GET_URI, u), buf.value.decode()])
small = C.create_string_buffer(70)
u.uri, u.uri_len = C.cast(small, C.c_char_p), 70
res.append(host.session_control(FASTRPC_GET_URI, u))
ed = EffectiveDomainId(b"cdsp", 4, 3)
res.append([host.session_control(FASTRPC_GET_EFFECTIVE_DOMAIN_ID, ed), ed.effective_domain_id])
um = (C.c_int * 2)(3, 1)
res.append(host.code(host.lib.remote_session_control(DSPRPC_CONTROL_UNSIGNED_MODULE, um, 8)))
caps = []
for cpu in ("", "v75"):
    os.environ["HEXBUILD_VNPU_CPU"] = cpu
    c = Capability(3, ARCH_VER, 0)
    caps.append([host.code(host.lib.remote_handle_control(DSPRPC_GET_DSP_INFO, C.byref(c), 12)), hex(c.capability)])
res.append(caps)
res.append([host.code(host.lib.remote_session_control(99, None, 0)), host.code(host.lib.remote_session_control(99, None, 0))])
res.append(host.code(host.lib.remote_mmap(0, 0, 0, 0, None)))
print(json.dumps(res))
""", dsp_env)
    r1, r2, r3, r4, uri, small, ed, unsigned, caps, unknown, remote_mmap = out
    assert [r1, r2, r3] == [[0, 11, 1], [0, 19, 2], [0, 27, 3]]  # domain + 8 * session; 0 is never reserved
    assert r4[0] == AEE_ENOSESSION
    assert uri == [0, "file:///libggml-htp-v73.so?htp_iface_skel_handle_invoke&_modver=1.0&_dom=cdsp&_session=2"]
    assert small == 0x4D  # AEE_EBADSIZE
    assert ed == [0, 27]
    assert unsigned == 0
    assert caps == [[0, "0x73"], [0, "0x75"]]
    assert unknown == [AEE_EUNSUPPORTED, AEE_EUNSUPPORTED]
    assert remote_mmap == AEE_EUNSUPPORTED
    lines = vnpu_lines(err)
    # said once each: the exhausted reservation, the unknown request (asked twice), remote_mmap
    assert len(lines) == 3, lines
    assert "no cdsp session left" in lines[0]
    assert "request 99 is not supported" in lines[1]
    assert "remote_mmap" in lines[2]


def test_sessions_are_separate_processes(lib, dsp_env):
    out, _ = run(lib, """
e0, h0 = host.open("file:///l.so?x&_dom=cdsp&_session=0")
e1, h1 = host.open("file:///l.so?x&_dom=cdsp&_session=1")
print(json.dumps([e0, e1, host.invoke(h0, 2, [b"ab"], [2])[1][0].decode(), host.invoke(h1, 2, [b"cd"], [2])[1][0].decode(),
      host.open("file:///l.so?x&_dom=adsp")[0], host.open("file:///l.so?x&_session=9")[0], host.close(h0), host.close(h1)]))
""", dsp_env)
    assert out == [0, 0, "ba", "dc", AEE_EINVALIDDOMAIN, AEE_EBADPARM, 0, 0]


def test_concurrent_invokes(lib, dsp_env):
    """Several threads invoke at once on one session: each gets its own reply (sorted by seq)."""
    out, _ = run(lib, """
import struct
e, h = host.open("file:///l.so?x")
res = {}
def worker(i):
    # method 4 sleeps in the DSP, so replies come back while other requests wait
    ms = (7 * i) % 30
    data = struct.pack("<I", ms) + b"thread-%02d" % i
    res[i] = host.invoke(h, 4, [data], [len(data)])
ts = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
[t.start() for t in ts]; [t.join() for t in ts]
ok = all(res[i][0] == 0 and res[i][1][0][::-1][4:] == b"thread-%02d" % i for i in range(12))
print(json.dumps([ok, host.close(h)]))
""", dsp_env)
    assert out == [True, 0]


def test_dsp_process_crash(lib, dsp_env):
    """A skel that crashes takes its DSP process down: the call in flight, a queue reader waiting
    in another thread and every later call get AEE_EINTERRUPTED at once, with one line naming the
    signal; closing the handle then frees the session, and a new open starts a new process."""
    out, err = run(lib, """
e, h = host.open("file:///l.so?x")
qe, q, qid = host.queue(3)
waiting = {}
def reader():
    waiting["r"] = host.read(q)[0]
t = threading.Thread(target=reader); t.start()
time.sleep(0.2)
crash = host.invoke(h, 3, [b"x"], [])[0]
t.join(10)
woken = waiting.get("r")  # before anything else could wake it
later = [host.invoke(h, 2, [b"x"], [1])[0], host.read(q, timeout=0)[0], host.write(q, [], b"x"),
         host.code(host.lib.dspqueue_close(q)), host.close(h)]
e2, h2 = host.open("file:///l.so?x")
print(json.dumps([crash, woken, later, e2, host.invoke(h2, 2, [b"ok"], [2])[1][0].decode(), host.close(h2)]))
""", dsp_env)
    crash, waited, later, e2, echoed, closed = out
    assert crash == AEE_EINTERRUPTED
    assert waited == AEE_EINTERRUPTED
    assert later == [AEE_EINTERRUPTED, AEE_EINTERRUPTED, AEE_EINTERRUPTED, 0, 0]
    assert (e2, echoed, closed) == (0, "ko", 0)
    lines = vnpu_lines(err)
    assert len(lines) == 1, lines
    assert "the DSP process of session 0" in lines[0] and "Segmentation fault (signal 11)" in lines[0]


def test_dsp_process_exits_mid_call(lib, dsp_env):
    out, err = run(lib, """
e, h = host.open("file:///l.so?x")
print(json.dumps([host.invoke(h, 8, [b"x"], [])[0], host.close(h)]))
""", dsp_env)
    assert out == [AEE_EINTERRUPTED, 0]
    assert [ln for ln in vnpu_lines(err)] == [
        vnpu_lines(err)[0]] and "ended unexpectedly (exit status 0)" in vnpu_lines(err)[0]


def test_dsp_process_that_ignores_eof_is_killed(lib, vnpu_stub, tmp_path):
    runtime = tmp_path / "rt.ignore-eof"
    runtime.write_bytes(b"")
    env = {"HEXBUILD_VNPU_QEMU": str(vnpu_stub), "HEXBUILD_VNPU_RUNTIME": str(runtime)}
    out, err = run(lib, """
e, h = host.open("file:///l.so?x")
t = time.monotonic(); c = host.close(h); dt = time.monotonic() - t
print(json.dumps([e, c, dt]))
""", env)
    e, c, dt = out
    assert (e, c) == (0, 0)
    assert 1.5 < dt < 10  # waited ~2 s for it, then SIGKILL
    assert vnpu_lines(err) == []


def test_no_dsp_process_outlives_the_program(lib, vnpu_stub, tmp_path):
    """A program that exits with its session open (llama.cpp keeps its sessions to the end): the
    library ends the DSP process at exit, even one that ignores EOF (killed after 2 s), so none is
    left holding the program's stderr."""
    runtime = tmp_path / "rt.ignore-eof"
    runtime.write_bytes(b"")
    env = {"HEXBUILD_VNPU_QEMU": str(vnpu_stub), "HEXBUILD_VNPU_RUNTIME": str(runtime)}
    t = time.monotonic()
    out, err = run(lib, """
e, h = host.open("file:///l.so?x")
def parent(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None
kids = [int(d) for d in os.listdir("/proc") if d.isdigit() and parent(d) == os.getpid()]
print(json.dumps([e, kids]))
""", env, timeout=60)
    assert time.monotonic() - t < 30
    e, kids = out
    assert e == 0 and len(kids) == 1
    assert not os.path.exists(f"/proc/{kids[0]}")
    assert vnpu_lines(err) == []


def test_malformed_message_is_dropped(lib, dsp_env):
    """A reply that is not even a header is said once and dropped; the call then waits as for any
    missing reply, until the process goes (here: the next request crashes it)."""
    out, err = run(lib, """
e, h = host.open("file:///l.so?x")
res = {}
t = threading.Thread(target=lambda: res.setdefault("g", host.invoke(h, 7, [b"x"], [])[0])); t.start()
time.sleep(0.5)
crash = host.invoke(h, 3, [b"x"], [])[0]
t.join(10)
print(json.dumps([res.get("g"), crash, host.close(h)]))
""", dsp_env)
    assert out == [AEE_EINTERRUPTED, AEE_EINTERRUPTED, 0]
    lines = vnpu_lines(err)
    assert len(lines) == 2 and "shorter than a header" in lines[0] and "died" in lines[1], lines


@pytest.mark.parametrize("env_case, expect", [
    ("no-qemu", "HEXBUILD_VNPU_QEMU is not set"),
    ("no-runtime", "HEXBUILD_VNPU_RUNTIME is not set"),
    ("missing-qemu", "HEXBUILD_VNPU_QEMU=/nonexistent/qemu-hexagon: No such file or directory"),
    ("not-executable", "exec of"),
])
def test_launch_failures(lib, dsp_env, tmp_path, env_case, expect):
    env = dict(dsp_env)
    if env_case == "no-qemu":
        del env["HEXBUILD_VNPU_QEMU"]
    elif env_case == "no-runtime":
        del env["HEXBUILD_VNPU_RUNTIME"]
    elif env_case == "missing-qemu":
        env["HEXBUILD_VNPU_QEMU"] = "/nonexistent/qemu-hexagon"
    else:
        bad = tmp_path / "qemu-hexagon"
        bad.write_bytes(b"\x7fELF garbage")  # executable bit, but not a program
        bad.chmod(0o755)
        env["HEXBUILD_VNPU_QEMU"] = str(bad)
    out, err = run(lib, """
p, fd = host.alloc(4096)
print(json.dumps([host.open("file:///l.so?x")[0], host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 4096, 2))]))
""", env)
    assert out == [AEE_ECONNREFUSED, AEE_ECONNREFUSED]
    lines = vnpu_lines(err)
    assert len(lines) == 2 and all(expect in ln for ln in lines), lines
    assert lines[0].startswith("hexbuild-vnpu: cannot start the DSP process: ")


def test_skel_not_found(lib, dsp_env):
    out, _ = run(lib, """
e, h = host.open("file:///missing.so?x")
e2, h2 = host.open("file:///l.so?x")
print(json.dumps([e, e2, host.close(h2)]))
""", dsp_env)
    assert out == [DSP_OFFSET + 0x3E, 0, 0]  # the DSP runtime's status, unchanged


def test_read_checks_sizes_and_keeps_the_packet(lib, dsp_env):
    out, _ = run(lib, """
p, fd = host.alloc(4096)
host.lib.fastrpc_mmap(3, fd, p, 0, 4096, 2)
e, q, qid = host.queue(3)
host.write(q, [(fd, 0, 16), (fd, 16, 16)], b"0123456789")
small_bufs = host.read(q, timeout=5_000_000, max_bufs=1)[0]
small_msg = host.read(q, timeout=5_000_000, max_msg=4)[0]
r, bufs, msg = host.read(q, timeout=5_000_000)
print(json.dumps([small_bufs, small_msg, r, len(bufs), msg.decode()]))
""", dsp_env)
    assert out == [AEE_EBADPARM, AEE_EBADPARM, 0, 2, "9876543210"]


def test_bad_arguments(lib, dsp_env):
    out, _ = run(lib, """
p, fd = host.alloc(4096)
e, q, qid = host.queue(3)
res = [host.lib.rpcmem_alloc(25, 1, 0) is None, host.lib.rpcmem_alloc(25, 1, -5) is None,
       host.lib.rpcmem_to_fd(C.c_void_p(12345)),
       host.code(host.lib.fastrpc_mmap(3, fd, p, 16, 4096, 2)),    # FastRPC maps whole fds only
       host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 1 << 20, 2)),  # longer than the fd
       host.code(host.lib.fastrpc_mmap(3, -1, p, 0, 4096, 2)),
       host.code(host.lib.fastrpc_mmap(40, fd, p, 0, 4096, 2)),
       host.code(host.lib.fastrpc_mmap(3, fd, p, 0, 4096, 1)),     # FASTRPC_MAP_RESERVED
       host.code(host.lib.dspqueue_close(None)), host.code(host.lib.dspqueue_write(None, 0, 0, None, 0, None, 0)),
       host.code(host.lib.remote_handle64_invoke(0x100, 0, None)), host.code(host.lib.remote_handle64_close(7))]
host.lib.fastrpc_mmap(3, fd, p, 0, 4096, 2)
res.append(host.write(q, [(fd, 4000, 200)], b"x"))                 # past the mapping
print(json.dumps(res))
""", dsp_env)
    assert out == [True, True, -1, AEE_EBADPARM, AEE_EBADPARM, AEE_EBADPARM, AEE_EBADPARM, AEE_EBADPARM,
                   AEE_EBADPARM, AEE_EBADPARM, AEE_EBADHANDLE, AEE_EBADHANDLE, AEE_EBADPARM]


def test_invoke_reply_of_the_wrong_size(lib, dsp_env):
    out, err = run(lib, """
e, h = host.open("file:///l.so?x")
e2, outs = host.invoke(h, 9, [b"abc"], [3])
print(json.dumps([e2, outs[0].decode(), host.invoke(h, 2, [b"abc"], [3])[1][0].decode(), host.close(h)]))
""", dsp_env)
    assert out == [AEE_EBADITEM, "\0\0\0", "cba", 0]  # nothing copied out of a bad reply
    lines = vnpu_lines(err)
    assert len(lines) == 1 and "answered 4 bytes of output, 3 were asked for" in lines[0], lines


def test_threads_under_threadsanitizer(vnpu_stub, dsp_env, tmp_path):
    """tests/vnpu/host_threads.c: invokes from 8 threads, two queue writers and a reader, buffers
    mapped and unmapped meanwhile, then a crash under a waiting reader, all with the library and
    the program built with -fsanitize=thread: no data race, every check passes."""
    probe = subprocess.run(["gcc", "-fsanitize=thread", "-x", "c", "-", "-o", str(tmp_path / "probe")],
                           input="int main(void){return 0;}", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("gcc has no ThreadSanitizer here")
    env = {**dsp_env, "EXTRA_CFLAGS": "-fsanitize=thread -O1", "CC_X86_64": "gcc -fsanitize=thread"}
    subprocess.run([str(HOST_SRC / "build.sh"), str(tmp_path), "x86_64"], check=True, env={**os.environ, **env})
    exe = tmp_path / "host_threads"
    subprocess.run(["gcc", "-fsanitize=thread", "-g", "-O1", "-pthread", str(ROOT / "tests/vnpu/host_threads.c"),
                    f"-L{tmp_path / 'x86_64'}", "-lcdsprpc", f"-Wl,-rpath,{tmp_path / 'x86_64'}", "-o", str(exe)],
                   check=True)
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300,
                       env={**{k: v for k, v in os.environ.items() if not k.startswith("HEXBUILD_VNPU")}, **dsp_env,
                            "TSAN_OPTIONS": "halt_on_error=1"})
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-4000:]
    assert "ThreadSanitizer" not in p.stderr
    assert vnpu_lines(p.stderr) == [vnpu_lines(p.stderr)[0]] and "Segmentation fault" in p.stderr


@pytest.mark.parametrize("name", ["remote.h", "rpcmem.h", "dspqueue.h", "AEEStdErr.h", "AEEStdDef.h"])
def test_headers_are_the_toolchain_doubles(name):
    """The library is compiled against hexbuild/dsp/include; the host library it stands in for was
    compiled against the toolchain double's SDK headers: the same declarations (struct layouts,
    request ids, codes); only the opening comment differs."""
    ours = (ROOT / "hexbuild/dsp/include" / name).read_text()
    theirs = (ROOT / "docker/toolchain-fixture/hexagon-sdk/incs" / name).read_text()
    assert ours.split("*/", 1)[1] == theirs.split("*/", 1)[1]  # all but the opening comment
