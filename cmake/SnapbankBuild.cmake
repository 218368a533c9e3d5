# SnapbankBuild.cmake -- compiler settings, dependencies and the helper
# functions the subdirectories use (sb_target_defaults, sb_add_test,
# sb_add_fuzzer).

set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

include(GNUInstallDirs)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(JEMALLOC REQUIRED IMPORTED_TARGET jemalloc)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
# snapbank serve: HTTP (libmicrohttpd) and JSON (jansson).
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd>=0.9.75)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson>=2.14)
# the shared tier: Redis Cluster over hiredis.
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
# libsodium: the shared tier's secrecy (keyed keys, values sealed with
# XChaCha20-Poly1305; store/remote/seal.c).
pkg_check_modules(SODIUM IMPORTED_TARGET libsodium)
if(NOT SODIUM_FOUND)
  message(FATAL_ERROR "libsodium not found (pkg-config libsodium): the shared tier's "
                      "secrecy (shared_secret_file) needs it; install libsodium-dev "
                      "(scripts/setup.sh lists it)")
endif()
if(SB_BUILD_TESTS)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()

if(SB_SANITIZE AND SB_TSAN)
  message(FATAL_ERROR "SB_SANITIZE and SB_TSAN cannot be combined")
endif()
# Sanitizers must see every allocation: libc malloc, not jemalloc.
if(SB_SANITIZE OR SB_TSAN)
  set(SB_WITH_JEMALLOC OFF CACHE BOOL "" FORCE)
endif()

set(SB_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wpointer-arith -Wvla -Wformat=2)
if(SB_WERROR)
  list(APPEND SB_WARNINGS -Werror)
endif()
if(SB_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(SB_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
# libFuzzer: instrument everything for coverage; fuzz targets add the driver.
if(SB_LIBFUZZER)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SB_LIBFUZZER needs clang (CC=clang)")
  endif()
  if(NOT SB_SANITIZE)
    message(FATAL_ERROR "SB_LIBFUZZER needs SB_SANITIZE=ON")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# Warnings, standard and include paths every target of ours gets.
function(sb_target_defaults target)
  target_compile_options(${target} PRIVATE ${SB_WARNINGS})
  target_compile_definitions(${target} PRIVATE _POSIX_C_SOURCE=200809L)
endfunction()

# sb_add_test(NAME src... [LIBS lib...] [ARGS arg...] [INTERNAL] [TIMEOUT s])
# -- a test program linked against the static library and registered with
# ctest, run with ARGS (TIMEOUT: ctest's bound for a hung test, default
# 300 s). INTERNAL tests may include the store's private headers.
function(sb_add_test name)
  cmake_parse_arguments(T "INTERNAL" "TIMEOUT" "LIBS;ARGS" ${ARGN})
  add_executable(${name} ${T_UNPARSED_ARGUMENTS})
  sb_target_defaults(${name})
  target_link_libraries(${name} PRIVATE snapbank_static PkgConfig::CMOCKA ${T_LIBS})
  if(T_INTERNAL)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/store/core ${PROJECT_SOURCE_DIR}/store/format ${PROJECT_SOURCE_DIR}/store/disk
                               ${PROJECT_SOURCE_DIR}/store/remote ${PROJECT_SOURCE_DIR}/store/open)
  endif()
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
endfunction()

# sb_add_fuzzer(NAME source corpus [more sources...]) -- a libFuzzer
# harness. Always builds NAME_replay (the harness plus fuzz/replay.c, any
# compiler) and registers a test that replays fuzz/corpus/<corpus>/; with
# SB_LIBFUZZER also builds NAME with -fsanitize=fuzzer.
function(sb_add_fuzzer name source corpus)
  add_executable(${name}_replay ${source} ${ARGN} ${PROJECT_SOURCE_DIR}/fuzz/replay.c)
  sb_target_defaults(${name}_replay)
  target_include_directories(${name}_replay PRIVATE ${PROJECT_SOURCE_DIR}/store/core ${PROJECT_SOURCE_DIR}/store/format ${PROJECT_SOURCE_DIR}/store/disk
                             ${PROJECT_SOURCE_DIR}/store/open)
  target_link_libraries(${name}_replay PRIVATE snapbank_static)
  add_test(NAME ${name}_replay
           COMMAND ${name}_replay ${PROJECT_SOURCE_DIR}/fuzz/corpus/${corpus})
  set_tests_properties(${name}_replay PROPERTIES TIMEOUT 600)
  if(SB_LIBFUZZER)
    add_executable(${name} ${source} ${ARGN})
    sb_target_defaults(${name})
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/store/core ${PROJECT_SOURCE_DIR}/store/format ${PROJECT_SOURCE_DIR}/store/disk
                               ${PROJECT_SOURCE_DIR}/store/open)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name} PRIVATE snapbank_static)
  endif()
endfunction()
