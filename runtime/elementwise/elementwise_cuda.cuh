// The CUDA-dialect elementwise kernels (shared by nvidia and, later, metax).
//
// Two kernels per functor and dtype, both grid-stride loops with int64
// element indices, both taking everything by value (no device metadata, no
// allocation, no synchronisation: safe in CUDA graphs):
//  - contiguous: flat operands, kWidth-element vectors (16 bytes when every
//    pointer is aligned to it), kElementwiseUnroll vectors in flight per thread;
//  - strided: any strides and broadcasts, offsets computed from the plan's
//    shape and strides (32-bit index arithmetic when numel fits).
// A dense copy (a functor that moves storage) is a cudaMemcpyAsync instead.
// A backend file only instantiates gpu::elementwise_kernel<Functor> and registers it.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUDA_CUH_
#define OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUDA_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "runtime/core/numeric.h"
#include "runtime/elementwise/elementwise.h"
#include "runtime/elementwise/functor.h"
#include "runtime/nvidia/device.cuh"

namespace oprt {
namespace gpu {

constexpr int kElementwiseThreads = 128;
constexpr int kElementwiseUnroll = 4;
constexpr int kMaxVectorBytes = 16;

template <class T, int kWidth>
struct alignas(sizeof(T) * kWidth) Vector {
  T lanes[kWidth];
};

template <class T, int kInputs>
struct InputPointers {
  const T* at[kInputs];
};

template <class T, int kWidth, class Functor, size_t... I>
__device__ inline Vector<T, kWidth> evaluate_lanes(const Functor& functor,
                                                   const Vector<T, kWidth>* operands,
                                                   std::index_sequence<I...>) {
  Vector<T, kWidth> result;
#pragma unroll
  for (int lane = 0; lane < kWidth; ++lane) {
    result.lanes[lane] = evaluate<T>(functor, operands[I].lanes[lane]...);
  }
  return result;
}

template <class T, class Functor, size_t... I>
__device__ inline T evaluate_stored(const Functor& functor, const T* values,
                                    std::index_sequence<I...>) {
  return evaluate<T>(functor, values[I]...);
}

template <int kWidth, class T, class Functor>
__global__ void __launch_bounds__(kElementwiseThreads)
    contiguous_kernel(Functor functor, int64_t numel, T* out,
                      InputPointers<T, Functor::kNumInputs> in) {
  constexpr int kInputs = Functor::kNumInputs;
  using Lanes = Vector<T, kWidth>;
  using Operands = std::make_index_sequence<kInputs>;
  const int64_t vectors = numel / kWidth;
  const int64_t tile = static_cast<int64_t>(kElementwiseThreads) * kElementwiseUnroll;
  for (int64_t first = blockIdx.x * tile + threadIdx.x; first < vectors;
       first += static_cast<int64_t>(gridDim.x) * tile) {
    // All loads first, then all math and stores: kUnroll x kInputs loads in flight.
    Lanes loaded[kElementwiseUnroll][kInputs];
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u) {
      const int64_t v = first + u * kElementwiseThreads;
      if (v < vectors) {
#pragma unroll
        for (int k = 0; k < kInputs; ++k) loaded[u][k] = reinterpret_cast<const Lanes*>(in.at[k])[v];
      }
    }
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u) {
      const int64_t v = first + u * kElementwiseThreads;
      if (v < vectors) {
        reinterpret_cast<Lanes*>(out)[v] = evaluate_lanes<T, kWidth>(functor, loaded[u], Operands{});
      }
    }
  }
  // The last numel % kWidth elements: one each for the first threads of block 0.
  const int64_t tail = vectors * kWidth + threadIdx.x;
  if (blockIdx.x == 0 && tail < numel) {
    T values[kInputs];
#pragma unroll
    for (int k = 0; k < kInputs; ++k) values[k] = in.at[k][tail];
    out[tail] = evaluate_stored<T>(functor, values, Operands{});
  }
}

// Offsets of element `linear` in out and in each input: peels the linear
// index into per-dim indices, innermost dim last.
template <class Index, int kInputs>
__device__ inline int64_t strided_offsets(const ElementwisePlan& plan, int64_t linear,
                                          int64_t* in_offsets) {
  Index rest = static_cast<Index>(linear);
  int64_t out_offset = 0;
#pragma unroll
  for (int k = 0; k < kInputs; ++k) in_offsets[k] = 0;
#pragma unroll
  for (int d = OPRT_MAX_DIMS - 1; d >= 0; --d) {
    if (d < plan.ndim) {
      const auto extent = static_cast<Index>(plan.shape[d]);
      const Index index = rest % extent;
      rest /= extent;
      out_offset += index * plan.out_strides[d];
#pragma unroll
      for (int k = 0; k < kInputs; ++k) in_offsets[k] += index * plan.in_strides[k][d];
    }
  }
  return out_offset;
}

template <class Index, class T, class Functor>
__global__ void __launch_bounds__(kElementwiseThreads)
    strided_kernel(Functor functor, ElementwisePlan plan, T* out,
                   InputPointers<T, Functor::kNumInputs> in) {
  constexpr int kInputs = Functor::kNumInputs;
  const int64_t tile = static_cast<int64_t>(kElementwiseThreads) * kElementwiseUnroll;
  for (int64_t first = blockIdx.x * tile + threadIdx.x; first < plan.numel;
       first += static_cast<int64_t>(gridDim.x) * tile) {
    // All loads first, then all math and stores, as in the contiguous kernel.
    int64_t out_offsets[kElementwiseUnroll];
    T loaded[kElementwiseUnroll][kInputs];
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u) {
      const int64_t linear = first + u * kElementwiseThreads;
      if (linear < plan.numel) {
        int64_t in_offsets[kInputs];
        out_offsets[u] = strided_offsets<Index, kInputs>(plan, linear, in_offsets);
#pragma unroll
        for (int k = 0; k < kInputs; ++k) loaded[u][k] = in.at[k][in_offsets[k]];
      }
    }
#pragma unroll
    for (int u = 0; u < kElementwiseUnroll; ++u) {
      if (first + u * kElementwiseThreads < plan.numel) {
        out[out_offsets[u]] =
            evaluate_stored<T>(functor, loaded[u], std::make_index_sequence<kInputs>{});
      }
    }
  }
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One tile of kElementwiseThreads x kElementwiseUnroll work items per block,
// as many blocks as tiles: the scheduler balances the SMs. Only beyond the
// grid limit (over 2^41 items) do the kernels' grid-stride loops take over.
inline unsigned grid_for(int64_t work_items) {
  const int64_t tiles = ceil_div(work_items, kElementwiseThreads * kElementwiseUnroll);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(tiles, INT32_MAX)));
}

// Launches the contiguous kernel with the widest vector every pointer is aligned to.
template <int kWidth, class T, class Functor>
void launch_contiguous(const Functor& functor, int64_t numel, T* out,
                       const InputPointers<T, Functor::kNumInputs>& in, uintptr_t address_bits,
                       cudaStream_t stream) {
  if constexpr (kWidth > 1) {
    if (address_bits % (kWidth * sizeof(T)) != 0) {
      return launch_contiguous<kWidth / 2>(functor, numel, out, in, address_bits, stream);
    }
  }
  contiguous_kernel<kWidth>
      <<<grid_for(numel / kWidth), kElementwiseThreads, 0, stream>>>(functor, numel, out, in);
}

template <class T, class Functor>
oprt_status_t launch_elementwise(const char* op, const Functor& functor,
                                 const ElementwisePlan& plan, void* out,
                                 const void* const* inputs, cudaStream_t stream) {
  InputPointers<T, Functor::kNumInputs> in;
  uintptr_t address_bits = reinterpret_cast<uintptr_t>(out);
  for (int k = 0; k < Functor::kNumInputs; ++k) {
    in.at[k] = static_cast<const T*>(inputs[k]);
    address_bits |= reinterpret_cast<uintptr_t>(inputs[k]);
  }
  T* typed_out = static_cast<T*>(out);
  if constexpr (moves_storage<Functor>::value) {
    // A dense copy is a byte copy; the copy engine path is as fast as any
    // kernel and is captured into CUDA graphs as a memcpy node.
    if (plan.contiguous) {
      if (out != inputs[0]) {
        const cudaError_t error =
            cudaMemcpyAsync(out, inputs[0], static_cast<size_t>(plan.numel) * sizeof(T),
                            cudaMemcpyDeviceToDevice, stream);
        if (error != cudaSuccess) {
          return fail(OPRT_ERR_RUNTIME, "%s: device copy failed: %s", op,
                      cudaGetErrorString(error));
        }
      }
      return OPRT_SUCCESS;
    }
  }
  if (plan.contiguous) {
    launch_contiguous<kMaxVectorBytes / static_cast<int>(sizeof(T))>(functor, plan.numel,
                                                                     typed_out, in, address_bits,
                                                                     stream);
  } else if (plan.numel <= INT32_MAX) {
    strided_kernel<int32_t>
        <<<grid_for(plan.numel), kElementwiseThreads, 0, stream>>>(functor, plan, typed_out, in);
  } else {
    strided_kernel<int64_t>
        <<<grid_for(plan.numel), kElementwiseThreads, 0, stream>>>(functor, plan, typed_out, in);
  }
  return check_launch(op);
}

// The ElementwiseKernel of Functor on a CUDA-dialect GPU: launches on stream.
template <class Functor>
oprt_status_t elementwise_kernel(const char* op, const ElementwisePlan& plan, const void* params,
                                 void* out, const void* const* inputs, void* stream) {
  const Functor& functor = *static_cast<const Functor*>(params);
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise<T>(op, functor, plan, out, inputs, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUDA_CUH_
