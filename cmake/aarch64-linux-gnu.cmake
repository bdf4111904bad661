# CMake toolchain for cross-building etwd's portable core for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu (+ libc6-dev-arm64-cross); the binaries run here under qemu-user
# (`qemu-aarch64 -L /usr/aarch64-linux-gnu BIN`). Used with -DETWD_PORTABLE_CORE=ON
# (cmake/portable_core.cmake): no OpenSSL, civetweb or libtracefs is needed. See
# scripts/test-arm64.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(ETWD_CROSS_TRIPLE aarch64-linux-gnu)

find_program(CMAKE_C_COMPILER NAMES ${ETWD_CROSS_TRIPLE}-gcc REQUIRED)
set(CMAKE_FIND_ROOT_PATH /usr/${ETWD_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# how CMake (and scripts) run the cross-built programs on this machine
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${ETWD_CROSS_TRIPLE})
