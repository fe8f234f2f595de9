"""C sources that run on the emulated Hexagon DSP (package data, compiled by hexbuild.kernels and
for the virtual NPU): ``include/`` the SDK, QuRT and C library headers the HTP code includes,
written from their public APIs; ``runtime/`` what those headers promise, for a user-mode emulated
DSP; ``harness/`` the kernel check's driver of a tree's op entry points; ``vnpu/`` the virtual
NPU's DSP process, which loads a real skel and serves a host library's FastRPC session."""
