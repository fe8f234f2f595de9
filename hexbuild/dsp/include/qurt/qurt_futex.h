/* QuRT futexes, declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_FUTEX_H
#define QURT_FUTEX_H
#ifdef __cplusplus
extern "C" {
#endif
int qurt_futex_wait(void *lock, int val);
int qurt_futex_wait_cancellable(void *lock, int val);
int qurt_futex_wake(void *lock, int n_to_wake);
#ifdef __cplusplus
}
#endif
#endif /* QURT_FUTEX_H */
