# Script mode (cmake -P): writes OUTPUT from cmake/build_info.cc.in.
find_package(Git QUIET)
# Without a git checkout (a Docker build context leaves .git out), the commit
# comes from $H3_GIT_COMMIT when set (docker build --build-arg H3_GIT_COMMIT=).
set(GIT_COMMIT "unknown")
if(DEFINED ENV{H3_GIT_COMMIT} AND NOT "$ENV{H3_GIT_COMMIT}" STREQUAL "")
  set(GIT_COMMIT "$ENV{H3_GIT_COMMIT}")
endif()
set(GIT_DIRTY "")
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE out RESULT_VARIABLE rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0)
    set(GIT_COMMIT "${out}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain
      --untracked-files=no
      WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE dirty ERROR_QUIET)
    if(dirty)
      set(GIT_DIRTY "-dirty")
    endif()
  endif()
endif()
if(WITH_CUDA)
  set(CUDA_ENABLED true)
else()
  set(CUDA_ENABLED false)
  set(CUDA_VERSION "")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/build_info.cc.in" "${OUTPUT}" @ONLY)
