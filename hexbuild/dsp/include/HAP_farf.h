/* FARF, the DSP's runtime log macro, declared from the public SDK API. Levels LOW/MEDIUM/HIGH compile in
 * when FARF_<LEVEL> is defined to 1; ERROR, FATAL and ALWAYS always do.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_FARF_H
#define HAP_FARF_H
#include <stdint.h>
#include <stdio.h>

#define HAP_LEVEL_LOW     0
#define HAP_LEVEL_MEDIUM  1
#define HAP_LEVEL_HIGH    2
#define HAP_LEVEL_ERROR   3
#define HAP_LEVEL_FATAL   4
#define HAP_LEVEL_RUNTIME 0x10
#define HAP_LEVEL_RUNTIME_LOW    (HAP_LEVEL_RUNTIME | HAP_LEVEL_LOW)
#define HAP_LEVEL_RUNTIME_MEDIUM (HAP_LEVEL_RUNTIME | HAP_LEVEL_MEDIUM)
#define HAP_LEVEL_RUNTIME_HIGH   (HAP_LEVEL_RUNTIME | HAP_LEVEL_HIGH)
#define HAP_LEVEL_RUNTIME_ERROR  (HAP_LEVEL_RUNTIME | HAP_LEVEL_ERROR)
#define HAP_LEVEL_RUNTIME_FATAL  (HAP_LEVEL_RUNTIME | HAP_LEVEL_FATAL)
#define HAP_LEVEL_ALWAYS  HAP_LEVEL_HIGH

#ifndef FARF_LOW
#define FARF_LOW 0
#endif
#ifndef FARF_MEDIUM
#define FARF_MEDIUM 0
#endif
#ifndef FARF_HIGH
#define FARF_HIGH 0
#endif
#define FARF_ERROR  1
#define FARF_FATAL  1
#define FARF_ALWAYS 1
#define FARF_RUNTIME_LOW    1
#define FARF_RUNTIME_MEDIUM 1
#define FARF_RUNTIME_HIGH   1
#define FARF_RUNTIME_ERROR  1
#define FARF_RUNTIME_FATAL  1

#define FARF_LOW_LEVEL    HAP_LEVEL_LOW
#define FARF_MEDIUM_LEVEL HAP_LEVEL_MEDIUM
#define FARF_HIGH_LEVEL   HAP_LEVEL_HIGH
#define FARF_ERROR_LEVEL  HAP_LEVEL_ERROR
#define FARF_FATAL_LEVEL  HAP_LEVEL_FATAL
#define FARF_ALWAYS_LEVEL HAP_LEVEL_ALWAYS
#define FARF_RUNTIME_LOW_LEVEL    HAP_LEVEL_RUNTIME_LOW
#define FARF_RUNTIME_MEDIUM_LEVEL HAP_LEVEL_RUNTIME_MEDIUM
#define FARF_RUNTIME_HIGH_LEVEL   HAP_LEVEL_RUNTIME_HIGH
#define FARF_RUNTIME_ERROR_LEVEL  HAP_LEVEL_RUNTIME_ERROR
#define FARF_RUNTIME_FATAL_LEVEL  HAP_LEVEL_RUNTIME_FATAL

#ifdef __cplusplus
extern "C" {
#endif
void HAP_debug_v2(int level, const char *file, int line, const char *format, ...);
int HAP_setFARFRuntimeLoggingParams(unsigned int mask, const char *files[], unsigned short numberOfFiles);
#ifdef __cplusplus
}
#endif

#define FARF(level, ...) \
    do { if (FARF_##level) HAP_debug_v2(FARF_##level##_LEVEL, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#endif /* HAP_FARF_H */
