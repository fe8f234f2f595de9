/* The Hexagon C library's <unistd.h> (what a DSP module may call), declared from the C library's public API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef _UNISTD_H
#define _UNISTD_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
unsigned int sleep(unsigned int seconds);
int usleep(unsigned int usec);
#ifdef __cplusplus
}
#endif
#endif
