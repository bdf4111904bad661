# CMake toolchain for cross-building etwd for 64-bit Windows with Debian's MinGW-w64.
# The -posix variant of the compiler is used: it ships winpthreads, which etwd's threads,
# mutexes and condition variables use on every OS. Use with:
#   cmake -S . -B build/win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(ETWD_MINGW_TRIPLE x86_64-w64-mingw32)

find_program(CMAKE_C_COMPILER NAMES ${ETWD_MINGW_TRIPLE}-gcc-posix REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${ETWD_MINGW_TRIPLE}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${ETWD_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The Windows API level and static linking are set by the top-level CMakeLists.txt (WIN32), so
# native MinGW builds get them too.
