/* A skel that goes wrong on purpose, for the tests of faults on the virtual NPU. It answers as
 * llama.cpp's htp_iface does (open 0, close 1, start 2, stop 3, mmap 4, munmap 5, the rest 0),
 * and $FAULT_SKEL (the DSP process's environment, the host program's) says where it fails:
 *   start   a load from address 0 in fault_skel_start (SIGSEGV during the start INVOKE)
 *   batch   start imports the queue; the first op batch faults in fault_skel_op_batch (a store to 0)
 *   loop    fault_skel_start never returns (the session's INVOKE hangs)
 *   unset   start imports the queue and batches are read and dropped (no answer)
 * Built as the SDK links a skel (vnpu_env.skel); named libggml-htp-vNN.so it stands in for one. */
typedef struct { void *pv; unsigned int nLen; } remote_buf;
typedef union { remote_buf buf; unsigned long long h64; } remote_arg;
typedef struct dspqueue *dspqueue_t;
typedef void (*dspqueue_callback_t)(dspqueue_t queue, int error, void *context);

char *getenv(const char *name);
int strcmp(const char *a, const char *b);
int dspqueue_import(unsigned long long id, dspqueue_callback_t packet_cb, dspqueue_callback_t error_cb, void *ctx,
                    dspqueue_t *queue);
int dspqueue_read_noblock(dspqueue_t queue, unsigned int *flags, unsigned int max_buffers, unsigned int *n_buffers,
                          void *buffers, unsigned int max_message, unsigned int *message_length, unsigned char *message);

int *volatile nowhere; /* 0: a load or store through it faults */
static dspqueue_t queue;

static const char *mode(void) {
    const char *m = getenv("FAULT_SKEL");
    return m ? m : "";
}

__attribute__((noinline)) void fault_skel_op_batch(dspqueue_t q, int error, void *ctx) {
    unsigned int flags, n_bufs, len;
    unsigned char msg[256], bufs[64 * 24];
    while (dspqueue_read_noblock(q, &flags, 64, &n_bufs, bufs, sizeof msg, &len, msg) == 0) {
        if (strcmp(mode(), "batch") == 0) *nowhere = (int) len;
    }
}

static void on_error(dspqueue_t q, int error, void *ctx) {}

__attribute__((noinline)) int fault_skel_start(const unsigned char *args) {
    if (strcmp(mode(), "start") == 0) return *nowhere;
    if (strcmp(mode(), "loop") == 0) {
        for (volatile int spin = 1; spin;) {
        }
    }
    unsigned long long id = 0;
    for (int i = 7; i >= 0; i--) id = id << 8 | args[8 + i]; /* start(sess_id, queue_id, ...): queue_id at 8 */
    return dspqueue_import(id, fault_skel_op_batch, on_error, 0, &queue);
}

int htp_iface_skel_handle_invoke(unsigned long long handle, unsigned int sc, remote_arg *pra) {
    unsigned int method = (sc >> 24) & 0x1f;
    if (method == 0) {
        *(unsigned long long *) pra[1].buf.pv = 0xfa017000ull;
        return 0;
    }
    if (method == 2) return pra[0].buf.nLen >= 16 ? fault_skel_start(pra[0].buf.pv) : 0x8000040e;
    return 0;
}
