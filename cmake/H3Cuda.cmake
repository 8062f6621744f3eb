# Decides H3_WITH_CUDA and, when on, enables the CUDA language.
#
# H3_WITH_CUDA defaults to ON when a CUDA compiler is found: on PATH, in
# $CUDACXX, or at the usual /usr/local/cuda. -DH3_WITH_CUDA=OFF forces a
# CPU-only build; -DH3_WITH_CUDA=ON without a compiler is an error.
include(CheckLanguage)

if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(H3_NVCC nvcc PATHS /usr/local/cuda/bin NO_CACHE)
  if(H3_NVCC)
    set(CMAKE_CUDA_COMPILER "${H3_NVCC}")
  endif()
endif()
check_language(CUDA)

if(CMAKE_CUDA_COMPILER)
  set(h3_cuda_default ON)
else()
  set(h3_cuda_default OFF)
endif()
option(H3_WITH_CUDA "Build the CUDA backend and kernels" ${h3_cuda_default})

if(H3_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR
      "H3_WITH_CUDA=ON but no CUDA compiler was found: install the CUDA "
      "Toolkit, set CUDACXX=/path/to/nvcc, or configure with -DH3_WITH_CUDA=OFF")
  endif()
  # The GPUs we build for, each as real machine code (no PTX: it would double
  # the compile time and JIT-compile on first use elsewhere). Override with
  # -DCMAKE_CUDA_ARCHITECTURES=... for other GPUs.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES
      80-real   # A100 (Ampere): mma.sync tensor cores, 164 KiB shared memory per SM
      90a-real  # H100 / H200 (Hopper): the 'a' keeps wgmma and TMA instructions
    )
  endif()
  # C++17 for .cu files: CMake 3.25 (Debian 12) does not know how to ask nvcc
  # for C++20. Headers shared with the kernels therefore stay C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "CUDA ${CUDAToolkit_VERSION}: architectures ${CMAKE_CUDA_ARCHITECTURES}")
endif()
