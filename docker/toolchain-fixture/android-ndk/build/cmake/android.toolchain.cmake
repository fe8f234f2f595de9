# Stand-in for the NDK r28b toolchain file inside hexbuild's test toolchain image.
#
# It targets aarch64-linux-android<API> with clang-19 the way the NDK's legacy toolchain file does
# (CMAKE_SYSTEM_VERSION 1 keeps CMake's built-in Android support out of the way). This NDK has no
# sysroot and no libc, so what it builds must be freestanding; compiler checks therefore build
# static libraries only. Paths are relative to this file, so the tree also works outside /opt.
cmake_minimum_required(VERSION 3.10)

get_filename_component(ANDROID_NDK "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
if(NOT ANDROID_ABI)
  set(ANDROID_ABI arm64-v8a)
endif()
if(NOT ANDROID_ABI STREQUAL "arm64-v8a")
  message(FATAL_ERROR "this NDK stand-in only targets arm64-v8a, not ${ANDROID_ABI}")
endif()
if(NOT ANDROID_PLATFORM)
  set(ANDROID_PLATFORM android-34)
endif()
string(REGEX REPLACE "^android-" "" ANDROID_PLATFORM_LEVEL "${ANDROID_PLATFORM}")

set(ANDROID TRUE)
set(CMAKE_SYSTEM_NAME Android)
set(CMAKE_SYSTEM_VERSION 1)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_ANDROID_ARCH_ABI arm64-v8a)
set(CMAKE_ANDROID_NDK "${ANDROID_NDK}")

set(_ndk_bin "${ANDROID_NDK}/toolchains/llvm/prebuilt/linux-x86_64/bin")
set(_ndk_target "aarch64-none-linux-android${ANDROID_PLATFORM_LEVEL}")
set(CMAKE_C_COMPILER "${_ndk_bin}/clang")
set(CMAKE_CXX_COMPILER "${_ndk_bin}/clang++")
set(CMAKE_ASM_COMPILER "${_ndk_bin}/clang")
set(CMAKE_C_COMPILER_TARGET "${_ndk_target}")
set(CMAKE_CXX_COMPILER_TARGET "${_ndk_target}")
set(CMAKE_ASM_COMPILER_TARGET "${_ndk_target}")
foreach(kind EXE SHARED MODULE)
  set(CMAKE_${kind}_LINKER_FLAGS_INIT "-fuse-ld=lld")
endforeach()

set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ANDROID_ABI ANDROID_PLATFORM)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
