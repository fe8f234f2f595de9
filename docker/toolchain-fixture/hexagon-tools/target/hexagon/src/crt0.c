/* hexbuild toolchain double: the start file of a standalone Hexagon program. llama.cpp's skels are
 * shared objects loaded by the DSP's loader; this only lets a compiler check link a program (a
 * standalone program has no OS to return to: it stops in place). */
int main(int argc, char **argv);
void _start(void) {
    main(0, 0);
    for (;;) {
    }
}
