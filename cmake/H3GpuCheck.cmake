# What scripts/gpu-pack.sh packs for a GPU machine (docs/gpu-machine.md).
# Included last, when every target exists.
#
# The target h3_gpu_check builds it: h3, h3serve, the benchmark programs,
# the sentencepiece module and every test labelled gpu (h3_cc_test records
# them in the global property H3_GPU_TESTS). <build>/gpu_check_files.txt
# lists it for the packer and for scripts/gpu-check.sh, one "key value" line
# each: the build's facts (build_type, with_cuda, cuda_architectures,
# cuda_version, source_dir), then "<kind> <absolute file>" with kind tool,
# bench, module or test, then "data <source-relative path> <test file>" for
# each DATA path a gpu test declares. The packer rewrites the files relative
# to the build directory inside the archive.
set(h3_gpu_check_arches "${CMAKE_CUDA_ARCHITECTURES}")
string(REPLACE ";" "," h3_gpu_check_arches "${h3_gpu_check_arches}")
set(h3_gpu_check_lines
  "build_type ${CMAKE_BUILD_TYPE}"
  "with_cuda ${H3_WITH_CUDA}"
  "cuda_architectures ${h3_gpu_check_arches}"
  "cuda_version ${CUDAToolkit_VERSION}"
  "source_dir ${PROJECT_SOURCE_DIR}")
set(h3_gpu_check_targets)
get_property(h3_gpu_tests GLOBAL PROPERTY H3_GPU_TESTS)
foreach(entry tool:h3 tool:h3serve bench:h3_engine_bench
              bench:h3_flashconv_bench bench:h3_attention_bench
              bench:h3_linear_bench bench:h3_step_bench
              module:h3_sentencepiece_module)
  string(REPLACE ":" ";" entry "${entry}")
  list(GET entry 0 kind)
  list(GET entry 1 name)
  if(TARGET ${name})  # h3serve needs the server, the bench CUDA, ...
    list(APPEND h3_gpu_check_lines "${kind} $<TARGET_FILE:${name}>")
    list(APPEND h3_gpu_check_targets ${name})
  endif()
endforeach()
foreach(name IN LISTS h3_gpu_tests)
  list(APPEND h3_gpu_check_lines "test $<TARGET_FILE:${name}>")
  list(APPEND h3_gpu_check_targets ${name})
endforeach()
get_property(h3_gpu_test_data GLOBAL PROPERTY H3_GPU_TEST_DATA)
foreach(entry IN LISTS h3_gpu_test_data)
  string(REPLACE ":" ";" entry "${entry}")
  list(GET entry 0 name)
  list(GET entry 1 path)
  list(APPEND h3_gpu_check_lines "data ${path} $<TARGET_FILE:${name}>")
endforeach()
list(JOIN h3_gpu_check_lines "\n" h3_gpu_check_content)
file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/gpu_check_files.txt"
  CONTENT "${h3_gpu_check_content}\n")
add_custom_target(h3_gpu_check)
add_dependencies(h3_gpu_check ${h3_gpu_check_targets})
