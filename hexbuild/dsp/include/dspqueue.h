/* The asynchronous host <-> DSP packet queue, declared from the public FastRPC API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef DSPQUEUE_H
#define DSPQUEUE_H
#include <stdint.h>
#include "AEEStdDef.h"

#define DSPQUEUE_MAX_BUFFERS     64
#define DSPQUEUE_MAX_MESSAGE_SIZE 65536
#define DSPQUEUE_TIMEOUT_NONE    0xffffffff

enum dspqueue_create_flags { DSPQUEUE_CREATE_RESERVED = 0 };
enum dspqueue_buffer_flags {
    DSPQUEUE_BUFFER_FLAG_REF = 0x00000001,
    DSPQUEUE_BUFFER_FLAG_DEREF = 0x00000002,
    DSPQUEUE_BUFFER_FLAG_FLUSH_SENDER = 0x00000004,
    DSPQUEUE_BUFFER_FLAG_INVALIDATE_SENDER = 0x00000008,
    DSPQUEUE_BUFFER_FLAG_FLUSH_RECIPIENT = 0x00000010,
    DSPQUEUE_BUFFER_FLAG_INVALIDATE_RECIPIENT = 0x00000020,
};
enum dspqueue_stat { DSPQUEUE_STAT_READ_QUEUE_PACKETS = 1, DSPQUEUE_STAT_READ_QUEUE_BYTES,
                     DSPQUEUE_STAT_WRITE_QUEUE_PACKETS, DSPQUEUE_STAT_WRITE_QUEUE_BYTES,
                     DSPQUEUE_STAT_EARLY_WAKEUP_WAIT_TIME, DSPQUEUE_STAT_EARLY_WAKEUP_MISSES,
                     DSPQUEUE_STAT_SIGNALING_PERF };

struct dspqueue;
typedef struct dspqueue *dspqueue_t;

struct dspqueue_buffer {
    uint32_t fd;
    uint32_t size;
    uint32_t offset;
    uint32_t flags;
    union {
        void *ptr;
        uint64_t address;
    };
};

typedef void (*dspqueue_callback_t)(dspqueue_t queue, AEEResult error, void *context);

#ifdef __cplusplus
extern "C" {
#endif
AEEResult dspqueue_create(int domain, uint32_t flags, uint32_t req_queue_size, uint32_t resp_queue_size,
                          dspqueue_callback_t packet_callback, dspqueue_callback_t error_callback,
                          void *callback_context, dspqueue_t *queue);
AEEResult dspqueue_close(dspqueue_t queue);
AEEResult dspqueue_export(dspqueue_t queue, uint64_t *queue_id);
AEEResult dspqueue_import(uint64_t queue_id, dspqueue_callback_t packet_callback,
                          dspqueue_callback_t error_callback, void *callback_context, dspqueue_t *queue);
AEEResult dspqueue_write_noblock(dspqueue_t queue, uint32_t flags, uint32_t num_buffers,
                                 struct dspqueue_buffer *buffers, uint32_t message_length, const uint8_t *message);
AEEResult dspqueue_write(dspqueue_t queue, uint32_t flags, uint32_t num_buffers, struct dspqueue_buffer *buffers,
                         uint32_t message_length, const uint8_t *message, uint32_t timeout_us);
AEEResult dspqueue_read_noblock(dspqueue_t queue, uint32_t *flags, uint32_t max_buffers, uint32_t *num_buffers,
                                struct dspqueue_buffer *buffers, uint32_t max_message_length,
                                uint32_t *message_length, uint8_t *message);
AEEResult dspqueue_read(dspqueue_t queue, uint32_t *flags, uint32_t max_buffers, uint32_t *num_buffers,
                        struct dspqueue_buffer *buffers, uint32_t max_message_length, uint32_t *message_length,
                        uint8_t *message, uint32_t timeout_us);
AEEResult dspqueue_peek_noblock(dspqueue_t queue, uint32_t *flags, uint32_t *num_buffers, uint32_t *message_length);
AEEResult dspqueue_peek(dspqueue_t queue, uint32_t *flags, uint32_t *num_buffers, uint32_t *message_length,
                        uint32_t timeout_us);
AEEResult dspqueue_write_early_wakeup_noblock(dspqueue_t queue, uint32_t wakeup_delay, uint32_t packet_flags);
AEEResult dspqueue_get_stat(dspqueue_t queue, enum dspqueue_stat stat, uint64_t *value);
#ifdef __cplusplus
}
#endif
#endif /* DSPQUEUE_H */
