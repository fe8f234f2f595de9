# hexbuild's patches to QEMU (GPL-2.0-or-later, see COPYING.md): shipped as data, applied to
# Debian's QEMU source when hexbuild makes the kernel check's image. No code here.
