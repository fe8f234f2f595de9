/* hexbuild virtual NPU: the wire protocol between the host library (libcdsprpc.so stand-in) and
 * the DSP process, over a SOCK_SEQPACKET socket (one message = one packet, little-endian). The
 * contract is issue 36's vnpu-spec; the host side (host/vnpu_host.h) includes this file. */
#ifndef HEXBUILD_VNPU_WIRE_H
#define HEXBUILD_VNPU_WIRE_H
#include <stdint.h>

enum vnpu_msg_type {
    VNPU_OPEN = 1,              /* char uri[len] -> status, u64 handle */
    VNPU_INVOKE = 2,            /* u64 handle, u32 sc, u32 n_bufs, u32 size[n], in bytes -> status, out bytes */
    VNPU_CLOSE = 3,             /* u64 handle -> status */
    VNPU_MMAP = 4,              /* SCM_RIGHTS fd; i32 host_fd, u32 flags, u64 offset, u64 size -> status, u32 addr */
    VNPU_MUNMAP = 5,            /* i32 host_fd -> status */
    VNPU_QUEUE_OPEN = 6,        /* u64 queue_id -> status */
    VNPU_QUEUE_CLOSE = 7,       /* u64 queue_id -> status */
    VNPU_QUEUE_PACKET = 8,      /* host -> DSP, no reply */
    VNPU_QUEUE_PACKET_DSP = 9,  /* DSP -> host, no reply */
    VNPU_LOG = 10,              /* DSP -> host text (unused: the DSP's stderr is the host's) */
    VNPU_CLOSE_SESSION = 11,    /* -> status, then the DSP process exits */
};
#define VNPU_REPLY 0x80000000u

struct vnpu_hdr {
    uint32_t type;
    uint32_t seq;
    uint32_t len;  /* bytes after the header */
};

struct vnpu_queue_packet {
    uint64_t queue_id;
    uint32_t flags;
    uint32_t n_bufs;
    uint32_t msg_len;
} __attribute__((packed));

struct vnpu_wire_buf {
    int32_t fd;       /* the host's fd of an MMAPed buffer */
    uint32_t flags;
    uint32_t offset;
    uint32_t size;
};

struct vnpu_mmap_req {
    int32_t host_fd;
    uint32_t flags;
    uint64_t offset;
    uint64_t size;
} __attribute__((packed));

struct vnpu_invoke_req {
    uint64_t handle;
    uint32_t sc;
    uint32_t n_bufs;
} __attribute__((packed));
#endif
