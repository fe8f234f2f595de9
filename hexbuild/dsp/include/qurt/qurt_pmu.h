/* QuRT performance monitor unit registers, declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_PMU_H
#define QURT_PMU_H
#define QURT_PMUCNT0 0
#define QURT_PMUCNT1 1
#define QURT_PMUCNT2 2
#define QURT_PMUCNT3 3
#define QURT_PMUCFG 4
#define QURT_PMUEVTCFG 5
#define QURT_PMUCNT4 6
#define QURT_PMUCNT5 7
#define QURT_PMUCNT6 8
#define QURT_PMUCNT7 9
#define QURT_PMUEVTCFG1 10
#define QURT_PMUSTID0 11
#define QURT_PMUSTID1 12
#ifdef __cplusplus
extern "C" {
#endif
void qurt_pmu_set(int reg_id, unsigned int regvalue);
unsigned int qurt_pmu_get(int red_id);
void qurt_pmu_enable(int enable);
int qurt_pmu_get_pmucnt(unsigned int *buf);
#ifdef __cplusplus
}
#endif
#endif /* QURT_PMU_H */
