/* The Hexagon SDK's basic types, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef AEESTDDEF_H
#define AEESTDDEF_H
#include <stdint.h>
#include <stddef.h>

/* The SDK's own spellings, not <stdint.h>'s: on 64-bit Linux uint64_t is unsigned long, but the
 * IDL's uint64 is unsigned long long everywhere (host code passes unsigned long long * to it). */
typedef signed char        int8;
typedef unsigned char      uint8;
typedef short              int16;
typedef unsigned short     uint16;
typedef int                int32;
typedef unsigned int       uint32;
typedef long long          int64;
typedef unsigned long long uint64;
typedef unsigned char boolean;
typedef char     char_t;
typedef int      AEEResult;

#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif
#ifndef _AEEStdDef_IDL_
#define _AEEStdDef_IDL_
#endif
#endif /* AEESTDDEF_H */
