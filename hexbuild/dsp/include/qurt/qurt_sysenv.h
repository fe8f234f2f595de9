/* QuRT system environment, declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_SYSENV_H
#define QURT_SYSENV_H
typedef struct { unsigned int max_hthreads; } qurt_sysenv_max_hthreads_t;
#ifdef __cplusplus
extern "C" {
#endif
int qurt_sysenv_get_max_hw_threads(qurt_sysenv_max_hthreads_t *mhwt);
#ifdef __cplusplus
}
#endif
#endif /* QURT_SYSENV_H */
