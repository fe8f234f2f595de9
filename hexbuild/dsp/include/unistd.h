/* hexbuild DSP runtime: the C library's <unistd.h> (what a DSP module may call). */
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
