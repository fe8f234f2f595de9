"""The toolchain double's qaic (docker/toolchain-fixture/hexagon-sdk/ipc/fastrpc/qaic/bin/qaic):
it reads the real trees' htp_iface.idl and writes C that compiles, and a call through the
generated stub reaches the skel's implementation with every argument intact and brings the rout
values back. The "DSP" here is the same process: remote_handle64_invoke hands the stub's
remote_arg array straight to the skel's NAME_skel_handle_invoke, which is the contract FastRPC
keeps between the two (the buffers cross as they are)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.infra.toolchain_double import fixture_tree

REPO = Path(__file__).resolve().parents[1]
SDK = REPO / "docker" / "toolchain-fixture" / "hexagon-sdk"
QAIC = SDK / "ipc" / "fastrpc" / "qaic" / "bin" / "qaic"
CLANG = shutil.which("clang-19") or shutil.which("clang")


@pytest.fixture(scope="module")
def incs(tmp_path_factory) -> Path:
    """The double's SDK headers (incs/: hexbuild/dsp/include's, placed as the double has them)."""
    return fixture_tree(tmp_path_factory.mktemp("double") / "toolchain-fixture") / "hexagon-sdk" / "incs"


def qaic(idl: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(QAIC), "-o", str(out), str(idl)], capture_output=True, text=True)


@pytest.mark.parametrize("version", ["0.3.20", "0.3.28", "0.3.36"])
def test_real_idl_compiles_for_host_and_dsp(version, tmp_path, request, incs):
    tree = request.getfixturevalue(f"tree_{version.replace('.', '_')}")
    idl = tree / "ggml" / "src" / "ggml-hexagon" / "htp" / "htp_iface.idl"
    cp = qaic(idl, tmp_path)
    assert cp.returncode == 0, cp.stderr
    header = (tmp_path / "htp_iface.h").read_text()
    assert "int htp_iface_start(remote_handle64 _h, uint32 sess_id, uint64 dsp_queue_id" in header
    if version != "0.3.20":
        assert "struct htp_iface_pmu_conf {\n    uint32 events[8];\n};" in header
        assert "int htp_iface_profiler(remote_handle64 _h, uint32 mode, const htp_iface_pmu_conf* pmu);" in header
    if version == "0.3.36":
        assert "int htp_iface_mmap(remote_handle64 _h, uint32 fd, uint64 size);" in header
        assert ("int htp_iface_hwinfo(remote_handle64 _h, uint32* n_threads, uint32* n_hvx, uint32* n_hmx, "
                "uint64* vtcm_size);") in header
    assert "REMOTE_SCALARS_MAKEX(0, 2, 1, 0, 0, 0)" in (tmp_path / "htp_iface_stub.c").read_text()  # start: one in buffer
    if not CLANG:
        pytest.fail("clang-19 is missing: run scripts/setup-test-env.sh")
    inc = ["-I", str(tmp_path), "-I", str(incs)]
    for target, src in (("aarch64-linux-gnu", "htp_iface_stub.c"), ("hexagon", "htp_iface_skel.c")):
        cp = subprocess.run([CLANG, f"--target={target}", "-ffreestanding", "-Wall", "-Werror", "-c", *inc,
                             str(tmp_path / src), "-o", str(tmp_path / (src + ".o"))], capture_output=True, text=True)
        assert cp.returncode == 0, f"{src} for {target}:\n{cp.stderr}"


ROUND_TRIP_IDL = """
#include "AEEStdDef.idl"
struct pair_t { uint16 a; uint64 b; };
interface rt : remote_handle64 {
    AEEResult start(in uint32 x, in uint64 y, in pair_t p, in uint8 z);
    AEEResult info(rout uint32 n, rout uint64 size, rout pair_t p);
    AEEResult copy(in sequence<int32> src, rout sequence<int32> dst, in string name);
};
"""

ROUND_TRIP_DSP = r"""
#include <string.h>
#include "rt.h"

/* The DSP side's implementation, as a skel's author writes it against rt.h. */
uint32 got_x; uint64 got_y; pair_t got_p; uint8 got_z;
int rt_open(const char *uri, remote_handle64 *h) { (void) uri; *h = 9; return 0; }
int rt_close(remote_handle64 h) { (void) h; return 0; }
int rt_start(remote_handle64 h, uint32 x, uint64 y, const pair_t *p, uint8 z) {
    (void) h; got_x = x; got_y = y; got_p = *p; got_z = z; return 0;
}
int rt_info(remote_handle64 h, uint32 *n, uint64 *size, pair_t *p) {
    (void) h; *n = 3; *size = 0x123456789abcULL; p->a = 77; p->b = 0xfeedULL; return 0;
}
int rt_copy(remote_handle64 h, const int32 *src, int srcLen, int32 *dst, int dstLen, const char *name) {
    (void) h;
    if (srcLen > dstLen || strcmp(name, "copy-me") != 0) return 14;
    for (int i = 0; i < srcLen; i++) dst[i] = src[i] * 2;
    return 0;
}
"""

ROUND_TRIP_MAIN = r"""
#include <dlfcn.h>
#include <stdio.h>
#include "rt.h"

/* The "FastRPC" between the stub and the skel library (loaded as the DSP loads it): the
 * remote_arg array crosses as it is. */
static int (*skel_invoke)(remote_handle64, uint32, remote_arg *);
static uint32 last_sc;
int remote_handle64_open(const char *uri, remote_handle64 *h) { (void) uri; *h = 7; return 0; }
int remote_handle64_close(remote_handle64 h) { (void) h; return 0; }
int remote_handle64_invoke(remote_handle64 h, uint32_t sc, remote_arg *pra) {
    last_sc = sc;
    return skel_invoke(h, sc, pra);
}

int main(int argc, char **argv) {
    void *dsp = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!dsp || argc < 2) return 2;
    skel_invoke = (int (*)(remote_handle64, uint32, remote_arg *)) dlsym(dsp, "rt_skel_handle_invoke");
    uint32 *got_x = dlsym(dsp, "got_x"); uint64 *got_y = dlsym(dsp, "got_y");
    pair_t *got_p = dlsym(dsp, "got_p"); uint8 *got_z = dlsym(dsp, "got_z");
    remote_handle64 h;
    if (rt_open(rt_URI, &h)) return 1;
    pair_t p = {5, 0x1122334455667788ULL};
    int err = rt_start(h, 0xdeadbeef, 0x0102030405060708ULL, &p, 200);
    printf("start %d sc %08x x %x y %llx p %u %llx z %u\n", err, last_sc, *got_x, (unsigned long long) *got_y,
           got_p->a, (unsigned long long) got_p->b, *got_z);
    uint32 n = 0; uint64 size = 0; pair_t q = {0, 0};
    err = rt_info(h, &n, &size, &q);
    printf("info %d sc %08x n %u size %llx q %u %llx\n", err, last_sc, n, (unsigned long long) size, q.a,
           (unsigned long long) q.b);
    int32 src[3] = {1, -2, 30}, dst[4] = {0, 0, 0, 0};
    err = rt_copy(h, src, 3, dst, 4, "copy-me");
    printf("copy %d sc %08x dst %d %d %d %d\n", err, last_sc, dst[0], dst[1], dst[2], dst[3]);
    return 0;
}
"""


def test_stub_and_skel_carry_every_argument(tmp_path, incs):
    """A call through the generated stub reaches the skel's implementation with in scalars,
    structs (by pointer), 64-bit values, sequences and strings intact, and rout values come back;
    the scalars word counts the primary and sequence buffers (REMOTE_SCALARS_MAKEX)."""
    if not CLANG:
        pytest.fail("clang-19 is missing: run scripts/setup-test-env.sh")
    (tmp_path / "rt.idl").write_text(ROUND_TRIP_IDL)
    cp = qaic(tmp_path / "rt.idl", tmp_path)
    assert cp.returncode == 0, cp.stderr
    (tmp_path / "main.c").write_text(ROUND_TRIP_MAIN)
    (tmp_path / "dsp.c").write_text(ROUND_TRIP_DSP)
    inc = ["-Wall", "-Werror", "-I", str(tmp_path), "-I", str(incs)]
    skel, exe = tmp_path / "librt_skel.so", tmp_path / "rt"
    # -Bsymbolic, as a skel is linked: its calls reach its own rt_* (the host's are the stub's)
    cp = subprocess.run([CLANG, *inc, "-shared", "-fPIC", "-Wl,-Bsymbolic", str(tmp_path / "dsp.c"),
                         str(tmp_path / "rt_skel.c"), "-o", str(skel)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    cp = subprocess.run([CLANG, *inc, str(tmp_path / "main.c"), str(tmp_path / "rt_stub.c"), "-ldl", "-o", str(exe)],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    run = subprocess.run([str(exe), str(skel)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    # start: method 2, one in buffer (the packed primary), nothing out
    assert out[0] == "start 0 sc 02010000 x deadbeef y 102030405060708 p 5 1122334455667788 z 200"
    # info: method 3, no in buffer, one rout primary
    assert out[1] == "info 0 sc 03000100 n 3 size 123456789abc q 77 feed"
    # copy: method 4, primary + src + name in, dst out
    assert out[2] == "copy 0 sc 04030100 dst 2 -4 60 0"


@pytest.mark.parametrize("bad, message", [
    ("interface x : remote_handle64 { AEEResult f(in float4 v); };", "unknown type 'float4'"),
    ("interface x : remote_handle64 { AEEResult f(inout uint32 v); };", "cannot read parameter"),
    ("struct s { uint32 a }; interface y { };", "no 'interface NAME : remote_handle64"),
    ("interface x : remote_handle64 { int f(in uint32 v); };", "must return AEEResult"),
])
def test_bad_idl_is_one_line_with_its_place(tmp_path, bad, message):
    (tmp_path / "x.idl").write_text("// a comment\n" + bad + "\n")
    cp = qaic(tmp_path / "x.idl", tmp_path / "out")
    assert cp.returncode == 1 and message in cp.stderr and cp.stderr.startswith("qaic: ")
    assert len(cp.stderr.strip().splitlines()) == 1 and "Traceback" not in cp.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # nothing half-written
