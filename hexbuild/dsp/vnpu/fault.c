/* hexbuild virtual NPU: a fault in the DSP process said in one line before the process dies, as
 * a phone's DSP writes a crash report naming the module and the offset of the faulting pc.
 *
 * qemu-hexagon delivers a guest fault (a load from an unmapped address, an unaligned access, a
 * trap) as a Linux signal to the program it runs; this runtime installs handlers for those, says
 *
 *   hexbuild-vnpu: the DSP faulted: SIGSEGV (address 0x00000000) at pc 0x4a012b40,
 *       libggml-htp-v73.so+0x2b40 (thread 1234)
 *
 * on one line (the module+offset form hexbuild's crash parser and `inspect --addr2line` read), and
 * dies of the same signal with the default action, so the host library still sees the signal in
 * the process's wait status. A pc in the runtime itself (memcpy called by the skel) is named by
 * the skel's return address instead. What qemu-hexagon stops on by itself (an instruction it does
 * not decode: "unhandled CPU exception") never reaches a handler: qemu says that on its own. */
#include <stdint.h>
#include <stdio.h>

#include "../runtime/sys.h"
#include "vnpu.h"

#define HX_SYS_RT_SIGACTION 134
#define HX_SYS_TGKILL 131
#define HX_SYS_GETPID 172
#define SA_SIGINFO 4
#define SA_RESETHAND 0x80000000u

/* The kernel's sigaction for Hexagon (no sa_restorer: qemu's signal trampoline page returns). */
struct ksigaction {
    void (*handler)(int, void *, void *);
    uint32_t flags;
    uint32_t mask[2];
};

/* linux-user/hexagon/signal.c: the ucontext's register block starts at byte 24; r31 (the
 * return address) is its word 31, the pc its word 42. siginfo: si_code at 8, si_addr at 12. */
#define UC_REGS 24
#define REG_LR 31
#define REG_PC 42

static const struct { int sig; const char *name; } caught[] = {
    { 4, "SIGILL" }, { 5, "SIGTRAP" }, { 7, "SIGBUS" }, { 8, "SIGFPE" }, { 11, "SIGSEGV" },
};

static const char *where(uint32_t addr, char *buf, size_t cap) {
    uint32_t off;
    const char *lib = vnpu_lib_at(addr, &off);
    if (!lib) return NULL;
    snprintf(buf, cap, "%s+0x%x", lib, (unsigned) off);
    return buf;
}

static void on_fault(int sig, void *info, void *uc) {
    const char *name = "signal";
    for (unsigned i = 0; i < sizeof caught / sizeof caught[0]; i++)
        if (caught[i].sig == sig) name = caught[i].name;
    const uint32_t *regs = (const uint32_t *) ((const char *) uc + UC_REGS);
    uint32_t pc = regs[REG_PC], lr = regs[REG_LR], addr = *(const uint32_t *) ((const char *) info + 12);
    char at[96], from[96], what[48] = "";
    if (sig == 11 || sig == 7) snprintf(what, sizeof what, " (address 0x%08x)", (unsigned) addr);
    if (where(pc, at, sizeof at))
        vnpu_log("the DSP faulted: %s%s at pc 0x%08x, %s (thread %ld)", name, what, (unsigned) pc, at, hx_gettid());
    else if (where(lr & ~3u, from, sizeof from))
        vnpu_log("the DSP faulted: %s%s at pc 0x%08x in the runtime, called from %s (thread %ld)", name, what,
                 (unsigned) pc, from, hx_gettid());
    else
        vnpu_log("the DSP faulted: %s%s at pc 0x%08x in the runtime (thread %ld)", name, what, (unsigned) pc,
                 hx_gettid());
    /* SA_RESETHAND made the action the default again: the same signal now ends the process, as
     * it would have without this handler (a fault faults again when the handler returns). */
    hx_syscall6(HX_SYS_TGKILL, hx_syscall6(HX_SYS_GETPID, 0, 0, 0, 0, 0, 0), hx_gettid(), sig, 0, 0, 0);
}

void vnpu_fault_handlers(void) {
    for (unsigned i = 0; i < sizeof caught / sizeof caught[0]; i++) {
        struct ksigaction sa = { on_fault, SA_SIGINFO | SA_RESETHAND, { 0, 0 } };
        hx_syscall6(HX_SYS_RT_SIGACTION, caught[i].sig, (long) &sa, 0, 8, 0, 0);
    }
}
