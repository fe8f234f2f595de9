"""hexbuild's DSP runtime (hexbuild/dsp/runtime/: the C library, libm and compiler helpers that the
kernel harness and the virtual NPU give llama.cpp's DSP code) run on the emulated DSP and checked
against NumPy / Python: the float functions within a few ulps of the float64 result, integer
division and the half conversions exactly, formatted output as C prints it."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.docker

HERE = Path(__file__).resolve().parent
RUNTIME = HERE.parent / "hexbuild" / "dsp" / "runtime"


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps of the reference value (0 where both agree, inf/nan included)."""
    want32 = want.astype(np.float32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    same = (got == want32) | (np.isnan(got) & np.isnan(want32))
    d = np.abs(got.astype(np.float64) - want) / spacing
    return np.where(same, 0.0, d)


@pytest.fixture(scope="module")
def runtime_results(kernel_run, tmp_path_factory):
    work = tmp_path_factory.mktemp("dsp-runtime")
    for f in ("start.c", "libc.c", "stdio.c", "heap.c", "libm.c", "rt.c", "sys.h"):
        shutil.copy(RUNTIME / f, work / f)
    shutil.copy(HERE / "dsp_runtime" / "check_runtime.c", work / "check_runtime.c")
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-10, 10, 600), rng.uniform(0.01, 100, 300), np.exp(rng.uniform(-20, 20, 100)),
                        [0.5, 1.0, 2.0, -0.0, 0.0, 1e-30, 88.0, -87.0, 3.0e4, 1.5, 2.5, -2.5, 65504.0, 65520.0,
                         6.1e-5, 5.96e-8, 1e-8]]).astype(np.float32)
    (work / "in.bin").write_bytes(struct.pack("<I", len(x)) + x.tobytes())
    flags = "--target=hexagon-unknown-linux-musl -mv73 -O2 -G0 -fno-pic -ffreestanding -nostdlibinc " \
            "-isystem /t/inc -isystem $(clang-21 -print-resource-dir)/include -I/t"
    inc = HERE.parent / "hexbuild" / "dsp" / "include"
    shutil.copytree(inc, work / "inc")
    script = (f"set -e; for f in start libc stdio heap libm rt; do clang-21 {flags} -fno-builtin -c $f.c -o $f.o; done; "
              f"clang-21 {flags} -c check_runtime.c -o check.o; ld.lld-21 -static -e _start -o check *.o; "
              "/opt/hexbuild/bin/qemu-hexagon -cpu v73 ./check in.bin out.bin")
    rc, log = kernel_run(["sh", "-c", script], work)
    assert rc == 0, log
    return x, (work / "out.bin").read_bytes()


def test_float_functions_are_within_a_few_ulps(runtime_results):
    import math

    x, blob = runtime_results
    n = len(x)
    names = ["expf", "logf", "sqrtf", "sinf", "cosf", "tanhf", "floorf", "ceilf", "exp2f", "log2f", "erff",
             "powf(x, 2.5)", "log2 (double)", "floor (double)"]
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        refs = [np.exp(xd), np.log(xd), np.sqrt(xd), np.sin(xd), np.cos(xd), np.tanh(xd), np.floor(xd), np.ceil(xd),
                np.exp2(xd), np.log2(xd), np.array([math.erf(v) for v in xd]), np.power(xd, 2.5), np.log2(xd),
                np.floor(xd)]
    for k, (name, ref) in enumerate(zip(names, refs)):
        got = np.frombuffer(blob, dtype="<f4", count=n, offset=k * n * 4).astype(np.float64)
        ok = np.isfinite(ref.astype(np.float32)) | np.isnan(ref)
        if name in ("sinf", "cosf"):
            ok &= np.abs(xd) < 2 ** 17  # the range the runtime promises (rope angles stay far below)
        worst = float(np.max(_ulps(got[ok], ref[ok])))
        limit = 0.0 if name.startswith(("floor", "ceil")) else 2.0
        assert worst <= limit, (name, worst)


def test_integer_division_and_half_conversions_are_exact(runtime_results):
    x, blob = runtime_results
    n = len(x)
    pos = 14 * n * 4
    u = x.view(np.uint32)
    for i in range(0, n - 1, 2):
        a, b = int(u[i]), int(u[i + 1]) >> (int(u[i]) & 15)
        b = b or 7
        sa = a - (1 << 32) if a >= 1 << 31 else a
        sb = (b | 1) * (-1 if a & 1 else 1)
        sb = (sb + (1 << 31)) % (1 << 32) - (1 << 31)
        la, lb = (a << 32) | int(u[i + 1]), (b * 3 + 1) & ((1 << 64) - 1)
        q = abs(sa) // abs(sb) * (1 if (sa < 0) == (sb < 0) else -1)
        r32 = struct.unpack_from("<4I", blob, pos)
        r64 = struct.unpack_from("<2Q", blob, pos + 16)
        assert r32 == (a // b, a % b, q & 0xffffffff, (sa - q * sb) & 0xffffffff), (a, b)
        assert r64 == (la // lb, la % lb), (la, lb)
        pos += 32
    for i in range(n):
        bits, back = struct.unpack_from("<Hf", blob, pos)
        h = np.float32(x[i]).astype(np.float16)
        assert bits == int(h.view(np.uint16)), (x[i], hex(bits), hex(int(h.view(np.uint16))))
        assert back == float(h) or (np.isnan(back) and np.isnan(h))
        pos += 6
    tail = blob[pos:]
    line, q = tail[:-8].decode(), struct.unpack("<d", tail[-8:])[0]
    assert line == "-42|42|beef|dsp| 3.14|-1234567890123|ab  |"
    assert q == 1.0 / 3.0  # __hexagon_divdf3: correctly rounded here
