# Generates build_info.cc with the version, the git commit and the build's
# features. The commit is re-read at every build by a small script; the file is
# only rewritten when its content changes, so an unchanged commit costs no
# recompilation.
set(H3_BUILD_INFO_CC "${CMAKE_BINARY_DIR}/generated/build_info.cc")
add_custom_target(h3_build_info_gen
  BYPRODUCTS "${H3_BUILD_INFO_CC}"
  COMMAND "${CMAKE_COMMAND}"
    -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DOUTPUT=${H3_BUILD_INFO_CC}
    -DVERSION=${PROJECT_VERSION}
    -DWITH_CUDA=${H3_WITH_CUDA}
    -DCUDA_VERSION=${CUDAToolkit_VERSION}
    -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
    -P "${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake"
  COMMENT "Reading the git commit"
  VERBATIM)
