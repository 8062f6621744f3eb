# h3_cc_test(NAME name SRCS a.cc ... DEPS lib ... LABELS unit|gpu|e2e|slow ...
#            [DATA dir-or-file ...])
#
# Builds one GoogleTest binary and registers each of its test cases with
# ctest, carrying the given labels, so that `ctest -L unit` or `ctest -LE gpu`
# select them. A test that calls GTEST_SKIP() is reported by ctest as skipped,
# not passed, so a GPU test on a machine without a GPU is visible as such.
# Tests labelled gpu are also recorded in the global property H3_GPU_TESTS,
# which cmake/H3GpuCheck.cmake turns into the list scripts/gpu-pack.sh packs,
# with the source-tree paths given as DATA (what the test reads, through
# tests/support/source_path.h, so that $H3_SOURCE_DIR can move it).
include(GoogleTest)
enable_testing()

function(h3_cc_test)
  cmake_parse_arguments(T "" "NAME" "SRCS;DEPS;LABELS;DATA" ${ARGN})
  if(NOT T_LABELS)
    message(FATAL_ERROR "h3_cc_test(${T_NAME}): give at least one label")
  endif()
  foreach(label IN LISTS T_LABELS)
    if(NOT label MATCHES "^(unit|gpu|e2e|slow)$")
      message(FATAL_ERROR "h3_cc_test(${T_NAME}): unknown label '${label}'")
    endif()
  endforeach()
  foreach(path IN LISTS T_DATA)
    if(NOT EXISTS "${PROJECT_SOURCE_DIR}/${path}")
      message(FATAL_ERROR "h3_cc_test(${T_NAME}): no DATA ${path} in the source tree")
    endif()
  endforeach()
  if("gpu" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY H3_GPU_TESTS ${T_NAME})
    foreach(path IN LISTS T_DATA)
      set_property(GLOBAL APPEND PROPERTY H3_GPU_TEST_DATA "${T_NAME}:${path}")
    endforeach()
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  # The labels from a file ctest reads after the discovered tests (listed in
  # ${T_NAME}_TESTS): gtest_discover_tests' PROPERTIES (CMake 3.25) splits a
  # list value, so a second label would become a property name.
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_labels.cmake")
  file(WRITE "${labels_file}"
    "if(${T_NAME}_TESTS)\n"
    "  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES LABELS \"${T_LABELS}\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()
