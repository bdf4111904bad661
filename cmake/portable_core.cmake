# ETWD_PORTABLE_CORE=ON: build only etwcore's portable part (the ETL reader, the decoders, the
# JSON writer, cJSON from Debian's source: no tracefs, no OpenSSL/civetweb), the reader/decoder unit tests and
# etwd-convert (etwcore/tools/etwd_convert.c: `etwd convert` without the server). For proving
# the code on other CPUs (cmake/aarch64-linux-gnu.cmake, scripts/test-arm64.sh); included by the
# top-level CMakeLists.txt instead of everything else.
file(GLOB PCORE_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/etwcore/src/*.c
     ${CMAKE_SOURCE_DIR}/etwcore/decode/*.c ${CMAKE_SOURCE_DIR}/etwcore/backends/etl/*.c)
# session.c and spec.c (the REST session layer) need cJSON
list(FILTER PCORE_SRC EXCLUDE REGEX "/src/(session|spec)\\.c$")
find_package(Threads REQUIRED)
# cJSON (the folded-stack reader of `etwd convert --format folded` parses events with it) from
# Debian's source package, as the Windows build takes it (scripts/deps.sh fetches it)
set(PCORE_CJSON "${ETWD_THIRD_PARTY}/cjson")
add_library(cjson STATIC "${PCORE_CJSON}/cJSON.c")
configure_file("${PCORE_CJSON}/cJSON.h" "${CMAKE_BINARY_DIR}/cjson_inc/cjson/cJSON.h" COPYONLY)
target_include_directories(cjson SYSTEM PUBLIC "${CMAKE_BINARY_DIR}/cjson_inc")
target_compile_options(cjson PRIVATE -w)
add_library(etwcore STATIC ${PCORE_SRC})
target_include_directories(etwcore PUBLIC ${CMAKE_SOURCE_DIR}/etwcore/include
  PRIVATE ${CMAKE_SOURCE_DIR}/etwcore/src ${CMAKE_SOURCE_DIR}/etwcore/decode
  ${CMAKE_SOURCE_DIR}/etwcore/backends)
target_compile_options(etwcore PRIVATE ${ETWD_WARN})
target_compile_definitions(etwcore PUBLIC ETWD_BACKEND_ETL=1)
target_link_libraries(etwcore PUBLIC Threads::Threads m cjson)

add_executable(etwd-convert ${CMAKE_SOURCE_DIR}/etwcore/tools/etwd_convert.c)
target_compile_options(etwd-convert PRIVATE ${ETWD_WARN})
target_link_libraries(etwd-convert PRIVATE etwcore)

# the reader/decoder unit tests (tests/unit: those that need only the portable part)
if(ETWD_TESTS)
  enable_testing()
  file(GLOB PCORE_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_dec*.c
       ${CMAKE_SOURCE_DIR}/tests/unit/test_etl_*.c ${CMAKE_SOURCE_DIR}/tests/unit/test_jw.c
       ${CMAKE_SOURCE_DIR}/tests/unit/test_mof_sysconfig.c
       ${CMAKE_SOURCE_DIR}/tests/unit/test_linux_uaddr.c)
  # the ETL test data, found as tests/CMakeLists.txt finds it
  set(PCORE_CORPUS "$ENV{ETWD_CORPUS}")
  set(PCORE_MANIFESTS "$ENV{ETWD_MANIFESTS}")
  if(PCORE_CORPUS STREQUAL "")
    set(PCORE_CORPUS "${CMAKE_SOURCE_DIR}/tests/data/corpus")
    if(EXISTS "${CMAKE_SOURCE_DIR}/../shared/corpus")
      set(PCORE_CORPUS "${CMAKE_SOURCE_DIR}/../shared/corpus")
    endif()
  endif()
  if(PCORE_MANIFESTS STREQUAL "")
    set(PCORE_MANIFESTS "${CMAKE_SOURCE_DIR}/tests/data/manifests")
    if(EXISTS "${CMAKE_SOURCE_DIR}/../shared/manifests")
      set(PCORE_MANIFESTS "${CMAKE_SOURCE_DIR}/../shared/manifests")
    endif()
  endif()
  foreach(src ${PCORE_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_compile_options(${name} PRIVATE ${ETWD_WARN})
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit
      ${CMAKE_SOURCE_DIR}/etwcore/src ${CMAKE_SOURCE_DIR}/etwcore/decode
      ${CMAKE_SOURCE_DIR}/etwcore/backends)
    target_link_libraries(${name} PRIVATE etwcore)
    add_test(NAME unit.${name} COMMAND ${name}) # through CMAKE_CROSSCOMPILING_EMULATOR if cross
    set_tests_properties(unit.${name} PROPERTIES ENVIRONMENT
      "ETWD_CORPUS=${PCORE_CORPUS};ETWD_MANIFESTS=${PCORE_MANIFESTS};ETWD_SRC=${CMAKE_SOURCE_DIR}"
      TIMEOUT 900)
  endforeach()
endif()
