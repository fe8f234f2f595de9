/* hexbuild DSP runtime: DCVS voltage corners and options. */
#ifndef HAP_DCVS_H
#define HAP_DCVS_H
#include "HAP_power.h"
#endif /* HAP_DCVS_H */
