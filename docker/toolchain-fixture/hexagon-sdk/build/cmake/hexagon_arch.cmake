# hexbuild toolchain double: the Hexagon SDK's hexagon_arch.cmake. From DSP_VERSION (or the
# image's DEFAULT_DSP_ARCH) it sets what the SDK's and llama.cpp's toolchain files read:
# HEXAGON_ARCH (v73), V_ARCH (the same) and V_ARCH_EXTN (the QuRT variant suffix, none here).
if(NOT DSP_VERSION)
  set(DSP_VERSION "$ENV{DEFAULT_DSP_ARCH}")
endif()
if(NOT DSP_VERSION)
  set(DSP_VERSION v73)
endif()
if(NOT DSP_VERSION MATCHES "^v[0-9]+$")
  message(FATAL_ERROR "DSP_VERSION must look like v73, not '${DSP_VERSION}'")
endif()
# Open LLVM 21 targets Hexagon v68 to v79.
if(NOT DSP_VERSION MATCHES "^v(68|69|71|73|75|79)$")
  message(FATAL_ERROR "hexbuild toolchain double: open LLVM 21 cannot build Hexagon ${DSP_VERSION} (it knows v68-v79)")
endif()
set(HEXAGON_ARCH "${DSP_VERSION}")
set(V_ARCH "${DSP_VERSION}")
set(V_ARCH_EXTN "")
