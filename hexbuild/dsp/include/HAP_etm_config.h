/* User ETM (embedded trace) switches, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_ETM_CONFIG_H
#define HAP_ETM_CONFIG_H
#ifdef __cplusplus
extern "C" {
#endif
int HAP_user_etm_enable(void);
int HAP_user_etm_disable(void);
#ifdef __cplusplus
}
#endif
#endif /* HAP_ETM_CONFIG_H */
