#!/bin/sh
# Builds the Hexagon target files of hexbuild's toolchain double with its own clang, for each HTP
# version and the layouts clang's Hexagon driver links from (hexagon/lib/vNN/G0 and .../G0/pic):
# start files (crt0.o, crt0_standalone.o, init.o, fini.o, initS.o, finiS.o) and the libraries a
# link names (libc.a, libm.a, libstdc++.a, libc++.a, libstandalone.a, libgcc.a, ...). The libraries are empty
# archives: what a skel calls (libc, QuRT, HAP) resolves on the DSP when the skel is loaded.
set -eu
tools=$(cd "$(dirname "$0")" && pwd)
target="$tools/target/hexagon"
src="$target/src"
for v in v68 v69 v71 v73 v75 v79; do
  for dir in "$target/lib/$v/G0" "$target/lib/$v/G0/pic" "$target/lib/$v"; do
    mkdir -p "$dir"
    "$tools/bin/hexagon-clang" -m"$v" -G0 -fpic -O2 -c "$src/crt0.c" -o "$dir/crt0.o"
    for f in crt0_standalone init fini initS finiS; do
      "$tools/bin/hexagon-clang" -m"$v" -G0 -fpic -O2 -c "$src/init.c" -o "$dir/$f.o"
    done
    for lib in c m stdc++ c++ c++abi standalone gcc qcc hexagon; do
      rm -f "$dir/lib$lib.a"
      "$tools/bin/llvm-ar" rc "$dir/lib$lib.a"
    done
  done
done
