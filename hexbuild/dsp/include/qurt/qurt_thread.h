/* QuRT threads, declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_THREAD_H
#define QURT_THREAD_H
#include <stdint.h>

#define QURT_THREAD_ATTR_NAME_MAXLEN 16
#define QURT_THREAD_ATTR_PRIORITY_DEFAULT 254
#define QURT_LOWEST_PRIO 254
#define QURT_HIGHEST_PRIO 1

typedef unsigned int qurt_thread_t;
typedef struct {
    char name[QURT_THREAD_ATTR_NAME_MAXLEN];
    unsigned short priority;
    unsigned short autostack;
    unsigned int timetest_id;
    unsigned int stack_size;
    void *stack_addr;
    unsigned short detach_state;
    unsigned int bus_priority;
} qurt_thread_attr_t;

#ifdef __cplusplus
extern "C" {
#endif
static inline void qurt_thread_attr_init(qurt_thread_attr_t *attr) {
    __builtin_memset(attr, 0, sizeof(*attr));
    attr->priority = QURT_THREAD_ATTR_PRIORITY_DEFAULT;
}
static inline void qurt_thread_attr_set_name(qurt_thread_attr_t *attr, const char *name) {
    __builtin_strncpy(attr->name, name, QURT_THREAD_ATTR_NAME_MAXLEN - 1);
    attr->name[QURT_THREAD_ATTR_NAME_MAXLEN - 1] = 0;
}
static inline void qurt_thread_attr_set_priority(qurt_thread_attr_t *attr, unsigned short priority) {
    attr->priority = priority;
}
static inline void qurt_thread_attr_set_stack_size(qurt_thread_attr_t *attr, unsigned int size) {
    attr->stack_size = size;
}
static inline void qurt_thread_attr_set_stack_addr(qurt_thread_attr_t *attr, void *addr) {
    attr->stack_addr = addr;
}
int qurt_thread_create(qurt_thread_t *thread_id, qurt_thread_attr_t *attr, void (*entrypoint)(void *), void *arg);
int qurt_thread_join(unsigned int tid, int *status);
void qurt_thread_exit(int status);
qurt_thread_t qurt_thread_get_id(void);
int qurt_thread_get_priority(qurt_thread_t threadid);
int qurt_thread_set_priority(qurt_thread_t threadid, unsigned short newprio);
void qurt_sleep(unsigned long long duration_us);
#ifdef __cplusplus
}
#endif
#endif /* QURT_THREAD_H */
