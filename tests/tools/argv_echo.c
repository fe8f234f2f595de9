/* A stand-in for a llama.cpp tool in tests: prints exactly what it was started with, as one
 * JSON object on stdout with every string hex-encoded (so no byte can be mistaken):
 *   {"argv": ["<hex>", ...], "cwd": "<hex>", "env": {"NAME": "<hex>", ...}}
 * Only GGML_*, LD_LIBRARY_PATH, ADSP_LIBRARY_PATH and ECHO_* variables are reported.
 * It says "argv_echo: N args" on stderr and exits with GGML_HEXAGON_ECHO_EXIT (default 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void hex(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        printf("%02x", *p);
    putchar('"');
}

static int reported(const char *kv) {
    return strncmp(kv, "GGML_", 5) == 0 || strncmp(kv, "ECHO_", 5) == 0 ||
           strncmp(kv, "LD_LIBRARY_PATH=", 16) == 0 || strncmp(kv, "ADSP_LIBRARY_PATH=", 18) == 0;
}

int main(int argc, char **argv) {
    char cwd[4096];
    printf("{\"argv\": [");
    for (int i = 0; i < argc; i++) {
        if (i) printf(", ");
        hex(argv[i]);
    }
    printf("], \"cwd\": ");
    hex(getcwd(cwd, sizeof cwd) ? cwd : "");
    printf(", \"env\": {");
    int first = 1;
    for (char **e = environ; *e; e++) {
        if (!reported(*e)) continue;
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        printf(first ? "" : ", ");
        first = 0;
        printf("\"%.*s\": ", (int)(eq - *e), *e);
        hex(eq + 1);
    }
    printf("}}\n");
    fflush(stdout);
    fprintf(stderr, "argv_echo: %d args\n", argc - 1);
    const char *code = getenv("GGML_HEXAGON_ECHO_EXIT");
    return code ? atoi(code) : 0;
}
