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

if(H3_BUILD_SERVER)
  find_package(Protobuf REQUIRED)            # CMake's module: Debian ships no config
  find_package(gRPC CONFIG REQUIRED)
  find_package(prometheus-cpp CONFIG REQUIRED)
  find_program(H3_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
endif()

if(H3_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
