# Every third-party library the project uses, found once here. Each comes from
# Debian (scripts/install-deps.sh installs them); none is downloaded at build
# time.
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)  # header-only; the loader reads JSON headers
find_package(CLI11 CONFIG REQUIRED)          # header-only; flags of h3 and h3serve

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
endif()

if(H3_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
