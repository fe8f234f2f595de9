/* VTCM and HMX resource manager of the compute DSP, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_COMPUTE_RES_H
#define HAP_COMPUTE_RES_H
#include <stddef.h>
#include <stdint.h>

typedef struct { unsigned long long attributes[8]; } compute_res_attr_t;
typedef compute_res_attr_t HAP_compute_res_attr_t;
typedef int (*HAP_compute_res_release_callback_t)(unsigned int context_id, void *client_context);

#ifdef __cplusplus
extern "C" {
#endif
int HAP_compute_res_attr_init(compute_res_attr_t *attr);
int HAP_compute_res_attr_set_serialize(compute_res_attr_t *attr, unsigned char b_enable);
int HAP_compute_res_attr_set_cache_mode(compute_res_attr_t *attr, unsigned char b_enable);
int HAP_compute_res_attr_set_vtcm_param(compute_res_attr_t *attr, unsigned int vtcm_size, unsigned char b_single_page);
int HAP_compute_res_attr_set_vtcm_param_v2(compute_res_attr_t *attr, unsigned int vtcm_size,
                                           unsigned int min_page_size, unsigned int min_vtcm_size);
int HAP_compute_res_attr_set_hmx_param(compute_res_attr_t *attr, unsigned char b_enable);
int HAP_compute_res_attr_set_release_callback(compute_res_attr_t *attr,
                                              HAP_compute_res_release_callback_t release_callback,
                                              void *client_context);
void *HAP_compute_res_attr_get_vtcm_ptr(compute_res_attr_t *attr);
int HAP_compute_res_attr_get_vtcm_ptr_v2(compute_res_attr_t *attr, void **vtcm_ptr, unsigned int *vtcm_size);
unsigned int HAP_compute_res_acquire(compute_res_attr_t *attr, unsigned int timeout_us);
int HAP_compute_res_release(unsigned int context_id);
int HAP_compute_res_acquire_cached(unsigned int context_id, unsigned int timeout_us);
int HAP_compute_res_release_cached(unsigned int context_id);
int HAP_compute_res_update_priority(unsigned int context_id, unsigned short priority);
int HAP_compute_res_query_VTCM(unsigned int application_id, unsigned int *total_block_size,
                               void *total_block_layout, unsigned int *avail_block_size, void *avail_block_layout);
int HAP_compute_res_hmx_lock(unsigned int context_id);
int HAP_compute_res_hmx_unlock(unsigned int context_id);
#ifdef __cplusplus
}
#endif
#endif /* HAP_COMPUTE_RES_H */
