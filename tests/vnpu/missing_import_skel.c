/* A skel that imports two functions no DSP runtime provides: loading it must fail, naming both. */
typedef union { struct { void *pv; unsigned int nLen; } buf; unsigned long long h64; } remote_arg;

int qurt_hypothetical_call(int);
int HAP_not_in_any_sdk(void);

int missing_skel_handle_invoke(unsigned long long handle, unsigned int sc, remote_arg *pra) {
    return qurt_hypothetical_call((int) sc) + HAP_not_in_any_sdk();
}
