/* Process information of the DSP user PD, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_PS_H
#define HAP_PS_H
#include <stdint.h>
#define PROCESS_NAME_LEN 56
typedef struct { int pid; char name[PROCESS_NAME_LEN]; } HAP_process;
#ifdef __cplusplus
extern "C" {
#endif
int HAP_get_pid(int *pid);
int HAP_get_process_name(char *name, int len);
int HAP_get_userpd_params(unsigned int *params);
#ifdef __cplusplus
}
#endif
#endif /* HAP_PS_H */
