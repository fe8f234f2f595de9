/* The smallest skel the loader's tests need, built as the SDK links one (PIC, -z now): its invoke
 * answers open (method 0: a handle), close (1) and one method (2) whose answer shows that
 *   - its constructor ran (an init_array entry, after relocation),
 *   - a data word holding an imported function's address was relocated (R_HEX_32 or GLOB_DAT),
 *   - a call through the PLT reached the runtime (R_HEX_JMP_SLOT),
 *   - a variadic call (snprintf, as FARF's) passes its arguments in the skel's ABI,
 *   - the in buffer arrived and the out buffer goes back. */
typedef struct { void *pv; unsigned int nLen; } remote_buf;
typedef union { remote_buf buf; unsigned long long h64; } remote_arg;

unsigned int strlen(const char *s);
char *strchr(const char *s, int c);
int strcmp(const char *a, const char *b);
int snprintf(char *s, unsigned int n, const char *fmt, ...);

char *(*volatile find)(const char *, int) = strchr;
static int constructed;
/* reads the relocated word (volatile: the compiler cannot run this at build time instead) */
__attribute__((constructor)) static void construct(void) { constructed = find ? 42 : 1; }

int tiny_skel_handle_invoke(unsigned long long handle, unsigned int sc, remote_arg *pra) {
    unsigned int method = (sc >> 24) & 0x1f;
    if (method == 0) {
        *(unsigned long long *) pra[1].buf.pv = 0x7e570000ull + constructed;
        return 0;
    }
    if (method == 1) return handle == 0x7e570000ull + 42 ? 0 : 0x8000040e;
    if (method == 2) {
        const char *text = pra[0].buf.pv;
        unsigned int *out = pra[1].buf.pv;
        out[0] = (unsigned int) constructed;
        out[1] = strlen(text);
        out[2] = (unsigned int) (find(text, '=') - text);
        out[3] = pra[0].buf.nLen;
        char line[32];
        int n = snprintf(line, sizeof line, "%d:%s:%x", 42, "ab", 0xbeefu);
        out[4] = n == 10 && strcmp(line, "42:ab:beef") == 0;
        return 7;  /* a status of the skel's own, passed back as it is */
    }
    return 0x80000414;  /* AEE_EUNSUPPORTED */
}
