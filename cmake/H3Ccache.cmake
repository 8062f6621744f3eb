# Use ccache for C++ and CUDA when it is installed: a rebuild after a clean
# checkout on the same machine (CI runs where the developer worked) then
# takes seconds instead of minutes.
find_program(H3_CCACHE ccache)
if(H3_CCACHE)
  foreach(lang CXX CUDA)
    if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER)
      set(CMAKE_${lang}_COMPILER_LAUNCHER "${H3_CCACHE}")
    endif()
  endforeach()
endif()
