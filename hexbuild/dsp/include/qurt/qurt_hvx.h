/* QuRT HVX units, declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_HVX_H
#define QURT_HVX_H
typedef enum { QURT_HVX_MODE_64B = 0, QURT_HVX_MODE_128B = 1 } qurt_hvx_mode_t;
#ifdef __cplusplus
extern "C" {
#endif
int qurt_hvx_lock(qurt_hvx_mode_t lock_mode);
int qurt_hvx_unlock(void);
int qurt_hvx_try_lock(qurt_hvx_mode_t lock_mode);
int qurt_hvx_get_mode(void);
int qurt_hvx_get_units(void);
int qurt_hvx_reserve(int num_units);
int qurt_hvx_cancel_reserve(void);
#ifdef __cplusplus
}
#endif
#endif /* QURT_HVX_H */
