/* hexbuild toolchain double: the Hexagon SDK's basic types (declarations written for the double). */
#ifndef AEESTDDEF_H
#define AEESTDDEF_H
#include <stdint.h>
#include <stddef.h>

typedef int8_t   int8;
typedef uint8_t  uint8;
typedef int16_t  int16;
typedef uint16_t uint16;
typedef int32_t  int32;
typedef uint32_t uint32;
typedef int64_t  int64;
typedef uint64_t uint64;
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
