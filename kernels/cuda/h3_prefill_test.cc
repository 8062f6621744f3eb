// SESSION SCAFFOLD: the GPU tests of H3PrefillCuda are written this session.
#include "kernels/cuda/h3_prefill.h"
