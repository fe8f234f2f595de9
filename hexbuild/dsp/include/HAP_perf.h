/* DSP timers, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_PERF_H
#define HAP_PERF_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
uint64_t HAP_perf_get_time_us(void);
uint64_t HAP_perf_get_qtimer_count(void);
uint64_t HAP_perf_qtimer_count_to_us(uint64_t count);
uint64_t HAP_perf_get_pcycles(void);
void HAP_timer_sleep(unsigned long long sleep_duration_us);
#ifdef __cplusplus
}
#endif
#endif /* HAP_PERF_H */
