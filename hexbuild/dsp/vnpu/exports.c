/* hexbuild virtual NPU: the runtime's export table, what a skel's undefined symbols resolve to (as
 * the DSP's loader resolves them against QuRT, the C library and the SDK's libraries). Written by
 * hand from what skels import (llvm-nm -u of the 0.3.28 skel, and llama.cpp's htp/ sources) and
 * from what the runtime defines; tests/vnpu checks it against a real skel's imports.
 *
 * The names are bound with asm labels to untyped declarations, so this file needs no prototypes
 * (and cannot clash with the builtins' own). */
#include <stddef.h>
#include <string.h>

#include "vnpu.h"

#define EXPORTS(X)                                                                                              \
    /* C library (../runtime/libc.c, heap.c, start.c) */                                                      \
    X(memcpy) X(memmove) X(memset) X(memcmp) X(memchr) X(strlen) X(strnlen) X(strcpy) X(strncpy) X(strcat)     \
    X(strncat) X(strcmp) X(strncmp) X(strchr) X(strrchr) X(strlcpy) X(vsnprintf) X(snprintf) X(sprintf)       \
    X(vfprintf) X(fprintf) X(vprintf) X(printf) X(puts) X(putchar) X(__assert_fail) X(atoi) X(getenv)         \
    X(qsort) X(abort) X(exit) X(stdout) X(stderr)                                                             \
    X(malloc) X(calloc) X(realloc) X(free) X(memalign) X(aligned_alloc) X(posix_memalign)                     \
    /* C math library (../runtime/libm.c) */                                                                 \
    X(exp) X(log) X(log2) X(log10) X(exp2) X(expf) X(exp2f) X(expm1f) X(logf) X(log2f) X(log10f) X(log1pf)    \
    X(fabs) X(fabsf) X(copysignf) X(copysign) X(trunc) X(floor) X(ceil) X(round) X(truncf) X(floorf) X(ceilf) \
    X(roundf) X(rintf) X(lrintf) X(lroundf) X(fmod) X(fmodf) X(fmaxf) X(fminf) X(fmax) X(fmin) X(ldexpf)      \
    X(ldexp) X(sqrt) X(sqrtf) X(pow) X(powf) X(sin) X(cos) X(sinf) X(cosf) X(tanf) X(tanh) X(tanhf) X(sinhf)  \
    X(coshf) X(erf) X(erff) X(atanf) X(frexpf)                                                                 \
    /* compiler-rt's Hexagon helpers (../runtime/rt.c) */                                                    \
    X(__hexagon_udivsi3) X(__hexagon_umodsi3) X(__hexagon_divsi3) X(__hexagon_modsi3) X(__hexagon_udivdi3)    \
    X(__hexagon_umoddi3) X(__hexagon_divdi3) X(__hexagon_moddi3) X(__hexagon_divdf3) X(__extendhfsf2)         \
    X(__truncsfhf2)                                                                                            \
    /* HAP (../runtime/hap.c, hap.c) */                                                                       \
    X(HAP_debug_v2) X(HAP_debug) X(HAP_setFARFRuntimeLoggingParams) X(HAP_perf_get_qtimer_count)              \
    X(HAP_perf_qtimer_count_to_us) X(HAP_perf_get_time_us) X(HAP_perf_get_pcycles) X(HAP_timer_sleep)         \
    X(HAP_compute_res_attr_init) X(HAP_compute_res_attr_set_serialize) X(HAP_compute_res_attr_set_cache_mode) \
    X(HAP_compute_res_attr_set_vtcm_param) X(HAP_compute_res_attr_set_vtcm_param_v2)                         \
    X(HAP_compute_res_attr_set_hmx_param) X(HAP_compute_res_attr_set_release_callback)                       \
    X(HAP_compute_res_attr_get_vtcm_ptr) X(HAP_compute_res_attr_get_vtcm_ptr_v2) X(HAP_compute_res_acquire)   \
    X(HAP_compute_res_release) X(HAP_compute_res_acquire_cached) X(HAP_compute_res_release_cached)           \
    X(HAP_compute_res_update_priority) X(HAP_compute_res_query_VTCM) X(HAP_compute_res_hmx_lock)              \
    X(HAP_compute_res_hmx_unlock) X(HAP_mmap) X(HAP_munmap) X(HAP_mmap2) X(HAP_munmap2) X(HAP_mmap_get)       \
    X(HAP_mmap_put) X(HAP_power_set) X(HAP_set_dcvs_v3_protected_bus_corners) X(HAP_user_etm_enable)         \
    X(HAP_user_etm_disable)                                                                                    \
    /* QuRT (qurt.c) */                                                                                       \
    X(qurt_thread_create) X(qurt_thread_join) X(qurt_thread_exit) X(qurt_thread_get_id)                       \
    X(qurt_thread_get_priority) X(qurt_thread_set_priority) X(qurt_sleep) X(qurt_futex_wait)                  \
    X(qurt_futex_wait_cancellable) X(qurt_futex_wake) X(qurt_sysenv_get_max_hw_threads) X(qurt_hvx_get_units) \
    X(qurt_hvx_lock) X(qurt_hvx_unlock) X(qurt_hvx_try_lock) X(qurt_hvx_get_mode) X(qurt_hvx_reserve)         \
    X(qurt_hvx_cancel_reserve) X(qurt_mem_cache_clean) X(qurt_pmu_set) X(qurt_pmu_get) X(qurt_pmu_enable)     \
    X(qurt_pmu_get_pmucnt)                                                                                     \
    /* dspqueue, DSP side (queue.c) */                                                                        \
    X(dspqueue_import) X(dspqueue_close) X(dspqueue_read_noblock) X(dspqueue_read) X(dspqueue_peek_noblock)   \
    X(dspqueue_peek) X(dspqueue_write_noblock) X(dspqueue_write) X(dspqueue_write_early_wakeup_noblock)       \
    X(dspqueue_get_stat)

/* Other names for the same functions: the SDK links skels with --wrap for the allocator, and
 * clang calls a memcpy variant for copies it knows are large and aligned. */
#define ALIASES(X)                                                                                              \
    X(__wrap_malloc, malloc) X(__wrap_calloc, calloc) X(__wrap_realloc, realloc) X(__wrap_free, free)          \
    X(__wrap_memalign, memalign) X(__wrap_aligned_alloc, aligned_alloc)                                       \
    X(__wrap_posix_memalign, posix_memalign) X(__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes, memcpy)

#define DECLARE(name) extern char hx_export_##name __asm__(#name);
EXPORTS(DECLARE)

struct export_row {
    const char *name;
    void *addr;
};

#define ROW(name) { #name, &hx_export_##name },
#define ALIAS_ROW(name, target) { #name, &hx_export_##target },
static const struct export_row table[] = { EXPORTS(ROW) ALIASES(ALIAS_ROW) };

void *vnpu_export(const char *name) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, name) == 0) return table[i].addr;
    }
    return NULL;
}
