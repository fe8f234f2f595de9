"""A realistic NPU library for inspect tests: the HTP op sources of the 0.3.20 llama.cpp tree
(``ggml/src/ggml-hexagon/htp/*.c`` but main.c and the HMX files) compiled with clang-19 for v73
with debug info, against the small SDK and libc stand-ins below (declarations only: the library
is only inspected, never run), and linked by ld.lld-19 with the SDK's symbols left unresolved.
About 0.8 MB of real HVX code: the Q4_0/MXFP4/IQ4_NL dot products, softmax, flash attention.

    from tests import inspect_real
    lib = inspect_real.build(tree_0_3_20, tmp_path / "libggml-htp-v73.so")   # cached by content
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tests import elf_factory as ef

# What the sources take from the Hexagon SDK and libc; clang 19 lacks three newer intrinsics.
STUBS = {
    "AEEStdDef.h": "#pragma once\n",
    "AEEStdErr.h": "#pragma once\n#define AEE_SUCCESS 0\n#define AEE_EFAILED 1\n#define AEE_ENOMEMORY 2\n#define AEE_EBADPARM 14\n#define AEE_EBADSTATE 16\n#define AEE_EITEMBUSY 39\n#define AEE_EVERSIONNOTSUPPORT 45\n#define AEE_EUNSUPPORTED 20\n#define AEE_EQURTTHREADCREATE 300\ntypedef int AEEResult;\n#define AEE_ENOMORE 21\n",
    "HAP_compute_res.h": "#pragma once\n#include <stdint.h>\ntypedef struct { uint64_t x[8]; } compute_res_attr_t;\nint HAP_compute_res_attr_init(compute_res_attr_t *);\nint HAP_compute_res_attr_set_serialize(compute_res_attr_t *, unsigned char);\nint HAP_compute_res_attr_set_vtcm_param(compute_res_attr_t *, unsigned int, unsigned char);\nint HAP_compute_res_attr_set_vtcm_param_v2(compute_res_attr_t *, unsigned int, unsigned int, unsigned int);\nint HAP_compute_res_attr_set_hmx_param(compute_res_attr_t *, unsigned char);\nvoid *HAP_compute_res_attr_get_vtcm_ptr(compute_res_attr_t *);\nint HAP_compute_res_attr_get_vtcm_ptr_v2(compute_res_attr_t *, void **, unsigned int *);\nunsigned int HAP_compute_res_acquire(compute_res_attr_t *, unsigned int);\nunsigned int HAP_compute_res_acquire_cached(unsigned int, unsigned int);\nint HAP_compute_res_release(unsigned int);\nint HAP_compute_res_release_cached(unsigned int);\nint HAP_compute_res_hmx_lock(unsigned int);\nint HAP_compute_res_hmx_unlock(unsigned int);\nint HAP_compute_res_query_VTCM(unsigned int, unsigned int *, unsigned int *, void *, unsigned int *);\n",
    "HAP_etm_config.h": "#pragma once\n",
    "HAP_farf.h": "#pragma once\n#define FARF(level, ...) ((void)0)\n#define HAP_LEVEL_HIGH 0\n",
    "HAP_mem.h": "#pragma once\n",
    "HAP_perf.h": "#pragma once\n#include <stdint.h>\nuint64_t HAP_perf_get_qtimer_count(void);\nuint64_t HAP_perf_qtimer_count_to_us(uint64_t);\n",
    "HAP_power.h": "#pragma once\n",
    "HAP_ps.h": "#pragma once\n",
    "assert.h": "#pragma once\n#define assert(x) ((void)0)\n#define static_assert _Static_assert\n",
    "dspqueue.h": "#pragma once\n#include <stdint.h>\ntypedef void *dspqueue_t;\nstruct dspqueue_buffer { uint32_t fd; uint32_t size; uint32_t offset; uint32_t flags; void *ptr; };\n",
    "hexbuild-compat.h": "#pragma once\n/* What clang 19's headers lack for the HTP sources (newer SDK intrinsics). */\n#define Q6_Vsf_equals_Vw(v) __builtin_HEXAGON_V6_vconv_sf_w_128B(v)\n#define Q6_Vh_equals_Vhf(v) __builtin_HEXAGON_V6_vconv_h_hf_128B(v)\n#define Q6_Vhf_equals_Vh(v) __builtin_HEXAGON_V6_vconv_hf_h_128B(v)\n",
    "math.h": "#pragma once\n#define INFINITY __builtin_inff()\n#define NAN __builtin_nanf(\"\")\n#define isnan(x) __builtin_isnan(x)\n#define isinf(x) __builtin_isinf(x)\nfloat expf(float); float logf(float); float sqrtf(float); float fabsf(float); float powf(float, float); float tanhf(float);\nfloat sinf(float); float cosf(float); float floorf(float); float ceilf(float); float roundf(float); float fmaxf(float, float); float fminf(float, float);\ndouble exp(double); double log(double); double sqrt(double); double pow(double, double); double fabs(double); double floor(double); double sin(double); double cos(double);\nfloat erff(float); float log1pf(float); float expm1f(float); float truncf(float); float log2f(float); double log2(double); float exp2f(float);\n",
    "qurt.h": "#pragma once\n#include \"qurt_thread.h\"\n",
    "qurt_thread.h": "#pragma once\n#include <stdint.h>\ntypedef unsigned int qurt_thread_t;\ntypedef struct { int x[16]; } qurt_thread_attr_t;\ntypedef struct { unsigned int max_hthreads; } qurt_sysenv_max_hthreads_t;\nqurt_thread_t qurt_thread_get_id(void);\nint qurt_thread_get_priority(qurt_thread_t);\nint qurt_thread_set_priority(qurt_thread_t, unsigned short);\nint qurt_futex_wait(void *, int);\nint qurt_futex_wake(void *, int);\nint qurt_hvx_get_units(void);\nvoid qurt_thread_attr_init(qurt_thread_attr_t *);\nvoid qurt_thread_attr_set_stack_addr(qurt_thread_attr_t *, void *);\nvoid qurt_thread_attr_set_stack_size(qurt_thread_attr_t *, unsigned int);\nvoid qurt_thread_attr_set_name(qurt_thread_attr_t *, const char *);\nvoid qurt_thread_attr_set_priority(qurt_thread_attr_t *, unsigned short);\nint qurt_thread_create(qurt_thread_t *, qurt_thread_attr_t *, void (*)(void *), void *);\nint qurt_thread_join(qurt_thread_t, int *);\nint qurt_sysenv_get_max_hw_threads(qurt_sysenv_max_hthreads_t *);\n",
    "remote.h": "#pragma once\n",
    "stdio.h": "#pragma once\n#include <stddef.h>\nint snprintf(char *, size_t, const char *, ...); int printf(const char *, ...);\ntypedef struct __FILE FILE;\n",
    "stdlib.h": "#pragma once\n#include <stddef.h>\nvoid *malloc(size_t); void free(void *); void *calloc(size_t, size_t); void *realloc(void *, size_t); void abort(void); int abs(int); void *memalign(size_t, size_t);\n",
    "string.h": "#pragma once\n#include <stddef.h>\nvoid *memcpy(void *, const void *, size_t); void *memset(void *, int, size_t); void *memmove(void *, const void *, size_t);\nint memcmp(const void *, const void *, size_t); size_t strlen(const char *); char *strcpy(char *, const char *); int strcmp(const char *, const char *);\nchar *strncpy(char *, const char *, size_t); char *strcat(char *, const char *);\n",
}
FORCED = ("stddef.h", "stdio.h", "string.h", "hexbuild-compat.h")


def sources(tree: Path) -> list[Path]:
    htp = tree / "ggml" / "src" / "ggml-hexagon" / "htp"
    return sorted(p for p in htp.glob("*.c") if p.name != "main.c" and not p.name.startswith("hmx-"))


def build(tree: Path, out: Path, version: str = "v73") -> Path:
    files = sources(tree)
    key = hashlib.sha256(json.dumps([ef._clang_id(), version, STUBS,
                                     [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in files]]).encode())
    cached = ef.cache_dir() / f"htp-{version}-{key.hexdigest()[:20]}.so"
    if not cached.exists():
        resource = subprocess.run([ef.CLANG, "-print-resource-dir"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        with tempfile.TemporaryDirectory(dir=ef.cache_dir()) as tmp:
            inc = Path(tmp) / "include"
            inc.mkdir()
            for name, text in STUBS.items():
                (inc / name).write_text(text)
            ggml = tree / "ggml"
            flags = ["--target=hexagon", f"-m{version}", "-mhvx", "-mhvx-length=128b", "-mhvx-ieee-fp", "-O3", "-g",
                     "-fPIC", "-ffreestanding", "-nostdlibinc", "-isystem", f"{resource}/include", "-I", str(inc),
                     "-I", str(ggml / "src" / "ggml-hexagon" / "htp"), "-I", str(ggml / "src" / "ggml-hexagon"),
                     "-I", str(ggml / "src"), "-I", str(ggml / "include"), "-DFP32_QUANTIZE_GROUP_SIZE=128",
                     "-w"] + [a for f in FORCED for a in ("-include", f)]
            objs = Path(tmp) / "obj"
            objs.mkdir()
            subprocess.run([ef.CLANG, *flags, "-c", *map(str, files)], cwd=objs, check=True, capture_output=True)
            built = Path(tmp) / "lib.so"
            subprocess.run(["ld.lld-19", "-shared", "--unresolved-symbols=ignore-all", "-o", str(built),
                            *sorted(map(str, objs.glob("*.o")))], check=True, capture_output=True)
            os.replace(built, cached)
    return ef._place(cached, out, 0o644)
