# Every third-party library the project uses, found once here. Each comes from
# Debian (scripts/install-deps.sh installs them); none is downloaded at build
# time.
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)  # header-only; the loader reads JSON headers
find_package(CLI11 CONFIG REQUIRED)          # header-only; flags of h3 and h3serve
# OpenBLAS (CPU matrix products), searched by path rather than through
# Debian's OpenBLASConfig.cmake, whose absolute paths break a relocated copy
# (docs/gpu-machine.md).
find_path(H3_CBLAS_INCLUDE_DIR cblas.h
  PATH_SUFFIXES include/x86_64-linux-gnu/openblas-pthread x86_64-linux-gnu/openblas-pthread
  REQUIRED)
find_library(H3_OPENBLAS_LIBRARY openblas
  PATH_SUFFIXES lib/x86_64-linux-gnu/openblas-pthread x86_64-linux-gnu/openblas-pthread
  REQUIRED)
add_library(h3_openblas INTERFACE)
target_include_directories(h3_openblas SYSTEM INTERFACE "${H3_CBLAS_INCLUDE_DIR}")
target_link_libraries(h3_openblas INTERFACE "${H3_OPENBLAS_LIBRARY}")
find_package(kissfft CONFIG REQUIRED COMPONENTS SHARED)  # CPU FFTs (H3 prefill); Debian ships only the shared library

# libzip: the loader reads torch.save zip archives. Found by hand because
# Debian's libzip-config.cmake requires the zipcmp/zipmerge tools, which live
# in another package; CMAKE_PREFIX_PATH finds a carried copy too.
find_path(H3_LIBZIP_INCLUDE_DIR zip.h REQUIRED)
find_library(H3_LIBZIP_LIBRARY zip REQUIRED)
add_library(h3_libzip INTERFACE IMPORTED)
set_target_properties(h3_libzip PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${H3_LIBZIP_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${H3_LIBZIP_LIBRARY}")

if(H3_BUILD_SERVER)
  find_package(Protobuf REQUIRED)            # CMake's module: Debian ships no config
  find_package(gRPC CONFIG REQUIRED)
  find_package(prometheus-cpp CONFIG REQUIRED)
  find_program(H3_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
  # cpp-httplib (Debian's libcpp-httplib-dev, a shared library): the
  # OpenAI-compatible HTTP API and `h3 bench --backend openai`. Its
  # pkg-config file carries the -D flags the library was built with, which
  # change its classes' layout, so it is found only through it.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(H3_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
endif()

if(H3_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()

# The tokenizer module needs RE2 (GPT-2's pre-tokenizer) and sentencepiece,
# found through their Debian pkg-config files; its tests read gzipped
# fixtures with zlib. A full build requires them; a build without the server
# (the gpu-machine preset) skips the module when they are missing.
find_package(PkgConfig)
if(PkgConfig_FOUND)
  pkg_check_modules(H3_RE2 IMPORTED_TARGET re2)
  pkg_check_modules(H3_SENTENCEPIECE IMPORTED_TARGET sentencepiece)
endif()
if(H3_BUILD_TESTS)
  find_package(ZLIB)
endif()
if(H3_RE2_FOUND AND H3_SENTENCEPIECE_FOUND AND
   (ZLIB_FOUND OR NOT H3_BUILD_TESTS))
  set(H3_BUILD_TOKENIZER ON)
elseif(H3_BUILD_SERVER)
  message(FATAL_ERROR "The tokenizer needs pkg-config, RE2 and sentencepiece "
    "(and zlib for its tests): run scripts/install-deps.sh")
else()
  set(H3_BUILD_TOKENIZER OFF)
  message(STATUS "RE2, sentencepiece or zlib not found: skipping tokenizer/")
endif()
