/* hexbuild virtual NPU, DSP side: what its modules share. The design and the wire protocol are
 * issue 36's (vnpu-spec); wire.h has the messages. */
#ifndef HEXBUILD_VNPU_H
#define HEXBUILD_VNPU_H
#include <stddef.h>
#include <stdint.h>

/* -- log.c: one line on stderr, beginning "hexbuild-vnpu: " ----------------------------------- */
void vnpu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, the first time only for a given flag (what is accepted but not modelled). */
void vnpu_log_once(int *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* HEXBUILD_VNPU_LOG=1: a protocol trace, lines beginning "hexbuild-vnpu: trace: dsp: " (the host
 * library's own begin "hexbuild-vnpu: trace: ", so a log's failures are the lines without it). */
extern int vnpu_tracing;
void vnpu_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define VNPU_TRACE(...) do { if (vnpu_tracing) vnpu_trace(__VA_ARGS__); } while (0)

/* -- mem.c: the host's buffers mapped into the DSP process (MMAP), named by the host's fd ------ */
/* Map local_fd (received with SCM_RIGHTS; closed here) as the host's host_fd. */
int vnpu_map_add(int host_fd, int local_fd, uint64_t offset, uint64_t size, uint32_t *dsp_addr);
int vnpu_map_remove(int host_fd);
/* The DSP address of [offset, offset + size) of the host's fd, or NULL if that is not mapped. */
void *vnpu_map_addr(int host_fd, uint64_t offset, uint64_t size);
/* The host fd and offset of a DSP address inside a mapping; 0, or -1 if it is in none. */
int vnpu_map_find(const void *p, int32_t *host_fd, uint32_t *offset);

/* -- loader.c: the skel, an ELF shared object, loaded once per process ------------------------ */
struct vnpu_lib;
/* Load the library at path (relocated, initialised); an AEE status. Names a missing import. */
int vnpu_load(const char *path, struct vnpu_lib **lib);
/* A symbol the library defines, or NULL. */
void *vnpu_symbol(const struct vnpu_lib *lib, const char *name);
/* The file name of the loaded library holding addr (and addr's offset in it), or NULL. */
const char *vnpu_lib_at(uintptr_t addr, uint32_t *offset);

/* -- fault.c: a fault of the skel (or of the runtime) said in one line before the process dies -- */
void vnpu_fault_handlers(void);

/* -- exports.c: what the runtime gives a skel to link against ---------------------------------- */
void *vnpu_export(const char *name);

/* -- queue.c: the DSP side of dspqueue --------------------------------------------------------- */
struct vnpu_wire_buf;
int vnpu_queue_open(uint64_t id);
int vnpu_queue_close(uint64_t id);
/* A host -> DSP packet: the queue takes a copy. */
void vnpu_queue_packet(uint64_t id, uint32_t flags, uint32_t n_bufs, const struct vnpu_wire_buf *bufs,
                       uint32_t msg_len, const uint8_t *msg);

/* -- main.c: messages to the host -------------------------------------------------------------- */
/* Send one packet of the header and the parts (no fd); 0 or -1 (the host is gone). */
int vnpu_send(uint32_t type, uint32_t seq, const void *a, size_t a_len, const void *b, size_t b_len,
              const void *c, size_t c_len);
#endif
