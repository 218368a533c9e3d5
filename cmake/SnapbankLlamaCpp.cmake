# SnapbankLlamaCpp.cmake -- where llama.cpp is, for the llama.cpp connector
# (bindings/llama.cpp). sb_find_llama_cpp() looks, in this order:
#
#   1. -DSB_LLAMA_CPP_DIR=DIR: a directory with include/llama.h and
#      lib/libllama.so, lib/libggml.so, lib/libggml-base.so (the cache of
#      scripts/fetch-llama.sh, or a llama.cpp install prefix). A directory
#      given and not usable is an error: configuration stops naming what
#      is missing.
#   2. An installed llama.cpp CMake package: find_package(llama CONFIG)
#      (llama-config.cmake; CMAKE_PREFIX_PATH or llama_DIR point to it).
#   3. The cache scripts/fetch-llama.sh fills: -DSB_LLAMA_CACHE=DIR, whose
#      default is the script's, $SB_LLAMA_CACHE or
#      ${XDG_CACHE_HOME:-$HOME/.cache}/snapbank/llama.cpp-v0.5.0 as the
#      environment was at the first configure.
#
# A STATUS line says which was used, or that none was (then the connector
# is not built and its tests are skipped). It sets, as internal cache
# variables (visible to every directory):
#
#   SB_HAVE_LLAMA          ON when llama.cpp was found, else OFF
#   SB_LLAMA_FOUND_BY      how: "SB_LLAMA_CPP_DIR DIR", "package DIR",
#                          "cache DIR", or why it was not found
#   SB_LLAMA_INCLUDE_DIRS  llama.h's directory, and ggml.h's if another
#   SB_LLAMA_LIBRARIES     full paths of libllama, libggml, libggml-base
#   SB_LLAMA_LIB_DIR       libllama's directory
#   SB_LLAMA_BACKEND_DIR   the directory of the CPU backends a program loads
#                          with ggml_backend_load_all_from_path (the
#                          libggml-cpu-*.so variants of a GGML_BACKEND_DL
#                          build, as the npm packages have); empty when
#                          libggml links its backends itself (a default
#                          llama.cpp build: nothing to load)

set(SB_LLAMA_CPP_TAG v0.5.0)
set(SB_LLAMA_CPP_DIR "" CACHE PATH
    "llama.cpp for the connector: a directory with include/llama.h and lib/libllama.so (empty: look for a llama CMake package, then the fetch-llama.sh cache)")
if(NOT "$ENV{SB_LLAMA_CACHE}" STREQUAL "")
  set(_sb_llama_cache "$ENV{SB_LLAMA_CACHE}")
elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_sb_llama_cache "$ENV{XDG_CACHE_HOME}/snapbank/llama.cpp-${SB_LLAMA_CPP_TAG}")
else()
  set(_sb_llama_cache "$ENV{HOME}/.cache/snapbank/llama.cpp-${SB_LLAMA_CPP_TAG}")
endif()
set(SB_LLAMA_CACHE "${_sb_llama_cache}" CACHE PATH
    "The cache scripts/fetch-llama.sh fills, used when neither SB_LLAMA_CPP_DIR nor a llama CMake package is given")

# _sb_llama_backend_dir(OUT dir... [ANY]) -- the first dir holding CPU
# backend variants (libggml-cpu-*.so); with ANY, a plain libggml-cpu.so
# counts too (a GGML_BACKEND_DL build without variants).
function(_sb_llama_backend_dir out)
  cmake_parse_arguments(B "ANY" "" "" ${ARGN})
  set(found "")
  foreach(d ${B_UNPARSED_ARGUMENTS})
    file(GLOB variants "${d}/libggml-cpu-*.so")
    if(variants OR (B_ANY AND EXISTS "${d}/libggml-cpu.so"))
      set(found "${d}")
      break()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# _sb_llama_from_dir(DIR OUT_MISSING) -- llama.cpp from a directory laid
# out as include/ and lib/ (or lib64/); sets the _sb_* results in the
# caller, or OUT_MISSING to what is missing.
macro(_sb_llama_from_dir dir missing)
  set(${missing} "")
  set(_sb_inc "")
  set(_sb_libs "")
  set(_sb_libdir "")
  if(NOT EXISTS "${dir}/include/llama.h")
    list(APPEND ${missing} "include/llama.h")
  endif()
  if(NOT EXISTS "${dir}/include/ggml.h")
    list(APPEND ${missing} "include/ggml.h")
  endif()
  foreach(_sb_l lib lib64)
    if(EXISTS "${dir}/${_sb_l}/libllama.so")
      set(_sb_libdir "${dir}/${_sb_l}")
      break()
    endif()
  endforeach()
  if(NOT _sb_libdir)
    list(APPEND ${missing} "lib/libllama.so")
  else()
    foreach(_sb_l llama ggml ggml-base)
      if(EXISTS "${_sb_libdir}/lib${_sb_l}.so")
        list(APPEND _sb_libs "${_sb_libdir}/lib${_sb_l}.so")
      else()
        list(APPEND ${missing} "lib/lib${_sb_l}.so")
      endif()
    endforeach()
  endif()
  set(_sb_inc "${dir}/include")
  _sb_llama_backend_dir(_sb_backend "${_sb_libdir}" "${dir}/bin")
endmacro()

function(sb_find_llama_cpp)
  set(how "")
  if(SB_LLAMA_CPP_DIR)
    get_filename_component(dir "${SB_LLAMA_CPP_DIR}" ABSOLUTE)
    _sb_llama_from_dir("${dir}" missing)
    if(missing)
      string(REPLACE ";" ", " missing "${missing}")
      message(FATAL_ERROR "SB_LLAMA_CPP_DIR=${SB_LLAMA_CPP_DIR} is not a llama.cpp: it lacks "
              "${missing}. Give a directory with include/llama.h, include/ggml.h and "
              "lib/libllama.so, libggml.so, libggml-base.so (scripts/fetch-llama.sh's cache, or "
              "a llama.cpp install prefix), or leave SB_LLAMA_CPP_DIR empty.")
    endif()
    set(how "SB_LLAMA_CPP_DIR ${dir}")
  else()
    find_package(llama CONFIG QUIET)
    if(llama_FOUND)
      # llama-config.cmake (llama.cpp's cmake/llama-config.cmake.in) sets
      # LLAMA_INCLUDE_DIR, llama_LIBRARY and, through ggml-config.cmake,
      # GGML_INCLUDE_DIR, GGML_LIBRARY, GGML_BASE_LIBRARY, GGML_BACKEND_DL.
      # Their paths are used, not the imported targets: those are local to
      # this directory and say IMPORTED_LINK_INTERFACE_LANGUAGES CXX, which
      # a C project cannot link with.
      set(_sb_inc "${LLAMA_INCLUDE_DIR}")
      if(GGML_INCLUDE_DIR AND NOT GGML_INCLUDE_DIR STREQUAL LLAMA_INCLUDE_DIR)
        list(APPEND _sb_inc "${GGML_INCLUDE_DIR}")
      endif()
      set(_sb_libs "${llama_LIBRARY}" "${GGML_LIBRARY}" "${GGML_BASE_LIBRARY}")
      get_filename_component(_sb_libdir "${llama_LIBRARY}" DIRECTORY)
      if(GGML_BACKEND_DL)
        _sb_llama_backend_dir(_sb_backend "${GGML_LIB_DIR}" "${LLAMA_BIN_DIR}" "${_sb_libdir}" ANY)
      else()
        set(_sb_backend "")
      endif()
      set(how "package ${llama_DIR}")
    elseif(EXISTS "${SB_LLAMA_CACHE}/.complete")
      _sb_llama_from_dir("${SB_LLAMA_CACHE}" missing)
      if(missing)
        string(REPLACE ";" ", " missing "${missing}")
        message(WARNING "llama.cpp cache ${SB_LLAMA_CACHE} lacks ${missing}: remove it and run "
                "scripts/setup.sh (or scripts/fetch-llama.sh) again")
      else()
        set(how "cache ${SB_LLAMA_CACHE}")
      endif()
    endif()
  endif()

  if(how)
    message(STATUS "llama.cpp connector: llama.cpp from ${how} "
            "(libllama in ${_sb_libdir}; CPU backends to load: ${_sb_backend})")
    set(have ON)
  else()
    set(how "llama.cpp not found: run scripts/setup.sh (needs npm) or pass -DSB_LLAMA_CPP_DIR=DIR")
    message(STATUS "llama.cpp connector: not built (${how}; looked for a llama CMake package and "
            "in ${SB_LLAMA_CACHE})")
    set(have OFF)
    set(_sb_inc "")
    set(_sb_libs "")
    set(_sb_libdir "")
    set(_sb_backend "")
  endif()
  set(SB_HAVE_LLAMA ${have} CACHE INTERNAL "llama.cpp found: the connector is built")
  set(SB_LLAMA_FOUND_BY "${how}" CACHE INTERNAL "where llama.cpp came from, or why not")
  set(SB_LLAMA_INCLUDE_DIRS "${_sb_inc}" CACHE INTERNAL "llama.h's and ggml.h's directories")
  set(SB_LLAMA_LIBRARIES "${_sb_libs}" CACHE INTERNAL "libllama, libggml, libggml-base")
  set(SB_LLAMA_LIB_DIR "${_sb_libdir}" CACHE INTERNAL "libllama's directory")
  set(SB_LLAMA_BACKEND_DIR "${_sb_backend}" CACHE INTERNAL
      "ggml_backend_load_all_from_path's directory (empty: nothing to load)")
endfunction()

# sb_llama_tsan_env(TEST...) -- under SB_TSAN, the tests that run llama.cpp's
# prebuilt (uninstrumented) libraries get tests/tsan-llama.supp, which drops
# the reports with a frame in those libraries (their thread pool syncs
# through atomics TSan cannot see); the options test-all.sh gives the rest
# are kept.
function(sb_llama_tsan_env)
  if(NOT SB_TSAN)
    return()
  endif()
  foreach(t ${ARGN})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
        "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 suppressions=${PROJECT_SOURCE_DIR}/tests/tsan-llama.supp")
  endforeach()
endfunction()
