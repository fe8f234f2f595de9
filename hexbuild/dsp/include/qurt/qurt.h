/* QuRT, the compute DSP's operating system (what llama.cpp's skel uses), declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_H
#define QURT_H
#include <stddef.h>
#include <stdlib.h>
#include "qurt_thread.h"
#include "qurt_futex.h"
#include "qurt_memory.h"
#include "qurt_hvx.h"
#include "qurt_pmu.h"
#include "qurt_sysenv.h"
#endif /* QURT_H */
