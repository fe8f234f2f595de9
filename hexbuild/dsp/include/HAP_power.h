/* The DSP power and clock request API (HAP_power_set), declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_POWER_H
#define HAP_POWER_H
#include <stdint.h>
#include "AEEStdDef.h"

typedef enum {
    HAP_DCVS_VCORNER_DISABLE, HAP_DCVS_VCORNER_SVS2, HAP_DCVS_VCORNER_SVS, HAP_DCVS_VCORNER_SVS_PLUS,
    HAP_DCVS_VCORNER_NOM, HAP_DCVS_VCORNER_NOM_PLUS, HAP_DCVS_VCORNER_TURBO, HAP_DCVS_VCORNER_TURBO_PLUS,
    HAP_DCVS_VCORNER_TURBO_L2 = 9, HAP_DCVS_VCORNER_TURBO_L3 = 10,
    HAP_DCVS_VCORNER_MAX = 255,
} HAP_dcvs_voltage_corner_t;

typedef enum {
    HAP_DCVS_EXP_VCORNER_DISABLE = 0, HAP_DCVS_EXP_VCORNER_MIN = 0x100, HAP_DCVS_EXP_VCORNER_LOW_SVS_D2 = 0x134,
    HAP_DCVS_EXP_VCORNER_LOW_SVS = 0x140, HAP_DCVS_EXP_VCORNER_SVS = 0x180, HAP_DCVS_EXP_VCORNER_SVS_L1 = 0x1C0,
    HAP_DCVS_EXP_VCORNER_NOM = 0x200, HAP_DCVS_EXP_VCORNER_NOM_L1 = 0x240, HAP_DCVS_EXP_VCORNER_TUR = 0x280,
    HAP_DCVS_EXP_VCORNER_TUR_L1 = 0x2A0, HAP_DCVS_EXP_VCORNER_TUR_L2 = 0x2B0, HAP_DCVS_EXP_VCORNER_TUR_L3 = 0x2C0,
    HAP_DCVS_EXP_VCORNER_MAX = 0xFFFF,
} HAP_dcvs_exp_voltage_corner_t;

typedef enum { HAP_CLK_PERF_HIGH, HAP_CLK_PERF_LOW } HAP_clk_perf_mode_t;

typedef enum {
    HAP_DCVS_V2_BALANCED_MODE = 0, HAP_DCVS_V2_POWER_SAVER_MODE = 1, HAP_DCVS_V2_POWER_SAVER_AGGRESSIVE_MODE = 2,
    HAP_DCVS_V2_PERFORMANCE_MODE = 3, HAP_DCVS_V2_DUTY_CYCLE_MODE = 4,
} HAP_dcvs_v2_option_t;

typedef enum {
    HAP_POWER_UNKNOWN_CLIENT_CLASS = 0x00, HAP_POWER_AUDIO_CLIENT_CLASS = 0x01, HAP_POWER_VOICE_CLIENT_CLASS = 0x02,
    HAP_POWER_COMPUTE_CLIENT_CLASS = 0x04, HAP_POWER_STREAMING_1HVX_CLIENT_CLASS = 0x08,
    HAP_POWER_STREAMING_2HVX_CLIENT_CLASS = 0x10,
} HAP_power_app_type_payload;

typedef enum {
    HAP_power_set_mips_bw = 1, HAP_power_set_HVX, HAP_power_set_apptype, HAP_power_set_linelock,
    HAP_power_set_DCVS, HAP_power_set_linelock_nothrow, HAP_power_set_DCVS_v2, HAP_power_set_vapss,
    HAP_power_set_vapss_v2, HAP_power_set_dcvs_v3_payload, HAP_power_set_DCVS_v3 = HAP_power_set_dcvs_v3_payload,
    HAP_power_set_sleep_mode, HAP_power_set_HMX, HAP_power_set_CENG, HAP_power_set_HMX_v2,
} HAP_Power_request_type;

typedef struct { HAP_dcvs_voltage_corner_t min_corner, max_corner, target_corner; } HAP_dcvs_corner_params_t;

typedef struct {
    uint32_t set_dcvs_enable; uint32_t dcvs_enable; uint32_t dcvs_option;
    uint32_t set_latency; uint32_t latency;
    uint32_t set_core_params; HAP_dcvs_corner_params_t core_params;
    uint32_t set_bus_params; HAP_dcvs_corner_params_t bus_params;
    uint32_t set_dcvs_v3_params; uint32_t param1, param2, param3, param4;
    uint32_t set_sleep_disable; uint32_t sleep_disable;
} HAP_power_dcvs_v3_payload;

typedef struct { boolean power_up; } HAP_power_hvx_payload;
typedef struct { boolean power_up; } HAP_power_hmx_payload;
typedef struct {
    boolean set_power; boolean power_up;
    boolean set_clock; HAP_dcvs_exp_voltage_corner_t target_corner, min_corner, max_corner;
    uint32_t freq_mhz; boolean pmu_enable; HAP_clk_perf_mode_t perf_mode;
} HAP_power_hmx_payload_v2;
typedef struct { uint32_t mipsPerThread; uint32_t mipsTotal; boolean set_mips; boolean set_bus_bw;
                 uint64_t bwBytePerSec; unsigned short busbwUsagePercentage; boolean set_latency; int latency;
               } HAP_power_mips_bw_payload;

typedef struct {
    HAP_Power_request_type type;
    union {
        HAP_power_mips_bw_payload mips_bw;
        HAP_power_hvx_payload hvx;
        HAP_power_app_type_payload apptype;
        HAP_power_dcvs_v3_payload dcvs_v3;
        HAP_power_hmx_payload hmx;
        HAP_power_hmx_payload_v2 hmx_v2;
    };
} HAP_power_request_t;

#ifdef __cplusplus
extern "C" {
#endif
int HAP_power_set(void *context, HAP_power_request_t *request);
int HAP_set_dcvs_v3_protected_bus_corners(HAP_power_request_t *request, unsigned char protect);
#ifdef __cplusplus
}
#endif
#endif /* HAP_POWER_H */
