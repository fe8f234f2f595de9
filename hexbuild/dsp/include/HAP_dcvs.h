/* DCVS voltage corners and options, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_DCVS_H
#define HAP_DCVS_H
#include "HAP_power.h"
#endif /* HAP_DCVS_H */
