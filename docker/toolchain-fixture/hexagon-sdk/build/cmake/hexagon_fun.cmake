# Stand-in for the Hexagon SDK's hexagon_fun.cmake in hexbuild's test toolchain image.
#
# build_idl(<idl> <target>) runs qaic on a FastRPC interface file and writes <stem>.h,
# <stem>_stub.c (host side) and <stem>_skel.c (NPU side) into the current binary directory,
# which becomes an include directory of <target>. The sources that list the generated files
# pick them up from there, as with the vendor SDK.
include_guard(GLOBAL)

function(build_idl IDL TARGET)
  get_filename_component(idl "${IDL}" ABSOLUTE)
  get_filename_component(stem "${IDL}" NAME_WE)
  set(out "${CMAKE_CURRENT_BINARY_DIR}")
  set(qaic "${HEXAGON_SDK_ROOT}/ipc/fastrpc/qaic/bin/qaic")
  add_custom_command(
    OUTPUT "${out}/${stem}.h" "${out}/${stem}_stub.c" "${out}/${stem}_skel.c"
    COMMAND "${qaic}" -o "${out}" "${idl}"
    DEPENDS "${idl}" "${qaic}"
    COMMENT "Generating ${stem}_skel.c, ${stem}_stub.c, ${stem}.h"
    VERBATIM)
  target_include_directories(${TARGET} PUBLIC "${out}" "${HEXAGON_SDK_ROOT}/incs")
  target_sources(${TARGET} PRIVATE "${out}/${stem}.h")
endfunction()
