/* hexbuild toolchain double: the SDK examples' DSP domain table (ids and URI suffixes). */
#ifndef DOMAIN_H
#define DOMAIN_H
#include "remote.h"

static domain supported_domains[] = {
    {ADSP_DOMAIN_ID, ADSP_DOMAIN},
    {MDSP_DOMAIN_ID, MDSP_DOMAIN},
    {SDSP_DOMAIN_ID, SDSP_DOMAIN},
    {CDSP_DOMAIN_ID, CDSP_DOMAIN},
    {CDSP1_DOMAIN_ID, CDSP1_DOMAIN},
};
#endif /* DOMAIN_H */
