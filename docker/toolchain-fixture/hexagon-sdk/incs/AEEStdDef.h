/* Stand-in for the Hexagon SDK's AEEStdDef.h: the result codes FastRPC interfaces return. */
#ifndef AEESTDDEF_H
#define AEESTDDEF_H
#include <stdint.h>
#include <stddef.h>

typedef int AEEResult;
#define AEE_SUCCESS        0
#define AEE_EFAILED        1
#define AEE_ENOMEMORY      2
#define AEE_EBADPARM       14
#define AEE_EUNSUPPORTED   20
#define AEE_EUNABLETOLOAD  ((int)0x80000406)
#endif
