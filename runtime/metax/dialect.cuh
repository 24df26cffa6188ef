// What the MetaX backend needs differently from nvidia in the shared CUDA-dialect
// sources; runtime/nvidia/device.cuh includes it when they are compiled with
// -DOPRT_METAX: by mxcc -x maca for MetaX GPUs (--config=metax), or by nvcc for
// the compatibility check that builds and runs the same translation units on
// NVIDIA GPUs (the metax_compat targets).
//
// Choices of the source dialect apply to both compilers, so the compatibility
// check exercises them; facts about the hardware apply only under mxcc
// (__MACACC__), since under nvcc the code runs on an NVIDIA GPU.
#ifndef OPERATOR_RUNTIME_METAX_DIALECT_CUH_
#define OPERATOR_RUNTIME_METAX_DIALECT_CUH_

// The backend whose kernels these sources register (OPRT_REGISTER_KERNEL).
#define OPRT_GPU_BACKEND OPRT_BACKEND_METAX

// Wide stores are plain assignments, without nvcc's write-back store intrinsic.
#define OPRT_LACKS_STWB_INTRINSIC 1

#if defined(__MACACC__)
// MetaX GPUs run waves of 64 threads; *_sync intrinsics take a 64-bit lane mask.
#define OPRT_WARP_SIZE 64
#define OPRT_FULL_WARP_MASK 0xffffffffffffffffull
#endif

#endif  // OPERATOR_RUNTIME_METAX_DIALECT_CUH_
