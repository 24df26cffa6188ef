// The CUDA-dialect elementwise kernels (shared by nvidia and, later, metax).
//
// Three kernels per functor and dtype, all grid-stride loops with int64
// element indices, all taking everything by value (no device metadata, no
// allocation, no synchronisation: safe in CUDA graphs):
//  - contiguous: flat operands, kWidth-element vectors (16 bytes when every
//    pointer is aligned to it), kElementwiseUnroll vectors in flight per thread;
//  - rows: broadcasts whose innermost dim is dense in every operand that
//    varies along it, vectorised along that dim, offsets computed once per row;
//  - strided: any strides and broadcasts, offsets computed per element from
//    the plan's shape and strides (multiply-high quotients when numel < 2^31).
// A dense copy (a functor that moves storage) is a cudaMemcpyAsync instead.
// A backend file only instantiates gpu::elementwise_kernel<Functor> and registers it;
// gpu::elementwise_kernel<Functor, CuteContiguous> (elementwise_cute.cuh) runs the
// contiguous plans with CuTe instead.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUDA_CUH_
#define OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUDA_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "runtime/core/numeric.h"
#include "runtime/elementwise/elementwise.h"
#include "runtime/elementwise/functor.h"
#include "runtime/nvidia/device.cuh"

namespace oprt {
namespace gpu {

constexpr int kElementwiseThreads = 128;
// Vectors each thread loads before it stores any. 2 rather than 4 (or 8): more,
// smaller blocks, which on the H200 took relu at 2^28 elements from 0.98x to
// 1.01x torch and a bf16 row broadcast (8192x8192 + 1x8192) from 98 to 82 us.
constexpr int kElementwiseUnroll = 2;
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

// Quotients by the plan's extents for indices below 2^31: a multiply-high,
// an add and a shift (Granlund and Montgomery's round-up method) in place of
// an integer division, which GPUs run as a long instruction sequence.
// Precomputed on the host, passed by value.
struct FastExtents {
  uint32_t magic[OPRT_MAX_DIMS];
  uint32_t shift[OPRT_MAX_DIMS];

  __device__ int64_t quotient(int64_t n, int d) const {
    const auto narrow = static_cast<uint32_t>(n);
    const auto high = static_cast<uint32_t>((static_cast<uint64_t>(narrow) * magic[d]) >> 32);
    return static_cast<int64_t>((high + narrow) >> shift[d]);
  }
};

inline FastExtents fast_extents(const ElementwisePlan& plan) {
  FastExtents extents{};
  for (int d = 0; d < plan.ndim; ++d) {
    const auto extent = static_cast<uint64_t>(plan.shape[d]);
    uint32_t shift = 0;
    while ((uint64_t{1} << shift) < extent) ++shift;
    extents.shift[d] = shift;
    const uint64_t excess = (uint64_t{1} << shift) - extent;
    extents.magic[d] = static_cast<uint32_t>((excess << 32) / extent + 1);
  }
  return extents;
}

// Quotients by the plan's extents for any int64 index: plain divisions.
struct WideExtents {
  int64_t shape[OPRT_MAX_DIMS];

  __device__ int64_t quotient(int64_t n, int d) const { return n / shape[d]; }
};

inline WideExtents wide_extents(const ElementwisePlan& plan) {
  WideExtents extents{};
  for (int d = 0; d < plan.ndim; ++d) extents.shape[d] = plan.shape[d];
  return extents;
}

// Offsets in out and in each input of element `linear` of the plan's first
// `dims` dims (all of them for an element, all but the innermost for a row):
// one quotient per dim but the outermost, whose index is what is left.
template <int kInputs, class Extents>
__device__ inline int64_t strided_offsets(const ElementwisePlan& plan, const Extents& extents,
                                          int dims, int64_t linear, int64_t* in_offsets) {
  int64_t rest = linear;
  int64_t out_offset = 0;
#pragma unroll
  for (int k = 0; k < kInputs; ++k) in_offsets[k] = 0;
#pragma unroll
  for (int d = OPRT_MAX_DIMS - 1; d >= 0; --d) {
    if (d < dims) {
      int64_t index = rest;
      if (d > 0) {
        rest = extents.quotient(rest, d);
        index -= rest * plan.shape[d];
      }
      out_offset += index * plan.out_strides[d];
#pragma unroll
      for (int k = 0; k < kInputs; ++k) in_offsets[k] += index * plan.in_strides[k][d];
    }
  }
  return out_offset;
}

template <class Extents, class T, class Functor>
__global__ void __launch_bounds__(kElementwiseThreads)
    strided_kernel(Functor functor, ElementwisePlan plan, Extents extents, T* out,
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
        out_offsets[u] = strided_offsets<kInputs>(plan, extents, plan.ndim, linear, in_offsets);
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

// Broadcast layouts whose innermost dim is dense in out and in every input
// that varies along it (stride 1; stride 0 for an input broadcast along it):
// rows of kWidth-element vectors. blockDim.y rows side by side, blockDim.x
// threads along a row; a thread finds its row's offsets once per row, then
// moves kElementwiseUnroll vectors per step. An input broadcast along the row
// (bit k of row_broadcasts; a mask, not a lookup of the plan's strides at a
// runtime dim, which would copy the plan to local memory) is read once per row.
template <int kWidth, class Extents, class T, class Functor>
__global__ void __launch_bounds__(kElementwiseThreads)
    rows_kernel(Functor functor, ElementwisePlan plan, Extents extents, int64_t rows,
                int64_t row_vectors, unsigned row_broadcasts, T* out,
                InputPointers<T, Functor::kNumInputs> in) {
  constexpr int kInputs = Functor::kNumInputs;
  using Lanes = Vector<T, kWidth>;
  const int inner = plan.ndim - 1;
  const int64_t column_tile = static_cast<int64_t>(blockDim.x) * kElementwiseUnroll;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    int64_t in_rows[kInputs];
    Lanes* out_row = reinterpret_cast<Lanes*>(
        out + strided_offsets<kInputs>(plan, extents, inner, row, in_rows));
    const Lanes* in_row[kInputs];
    Lanes row_values[kInputs] = {};
#pragma unroll
    for (int k = 0; k < kInputs; ++k) {
      in_row[k] = reinterpret_cast<const Lanes*>(in.at[k] + in_rows[k]);
      if (row_broadcasts & (1u << k)) {
        const T value = in.at[k][in_rows[k]];
#pragma unroll
        for (int lane = 0; lane < kWidth; ++lane) row_values[k].lanes[lane] = value;
      }
    }
    for (int64_t first = blockIdx.x * column_tile + threadIdx.x; first < row_vectors;
         first += static_cast<int64_t>(gridDim.x) * column_tile) {
      Lanes loaded[kElementwiseUnroll][kInputs];
#pragma unroll
      for (int u = 0; u < kElementwiseUnroll; ++u) {
        const int64_t v = first + u * blockDim.x;
        if (v < row_vectors) {
#pragma unroll
          for (int k = 0; k < kInputs; ++k) {
            loaded[u][k] = (row_broadcasts & (1u << k)) ? row_values[k] : in_row[k][v];
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kElementwiseUnroll; ++u) {
        const int64_t v = first + u * blockDim.x;
        if (v < row_vectors) {
          out_row[v] = evaluate_lanes<T, kWidth>(functor, loaded[u],
                                                 std::make_index_sequence<kInputs>{});
        }
      }
    }
  }
}

// One tile of kElementwiseThreads x kElementwiseUnroll work items per block,
// as many blocks as tiles: the scheduler balances the SMs. Only beyond the
// grid limit (over 2^41 items) do the kernels' grid-stride loops take over.
inline unsigned grid_for(int64_t work_items) {
  const int64_t tiles = ceil_div(work_items, kElementwiseThreads * kElementwiseUnroll);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(tiles, INT32_MAX)));
}

// Calls launch(std::integral_constant<int, kWidth>) with the widest kWidth
// (in elements of T) that every bit pattern in alignment_bits is a multiple of,
// in bytes: pointers, and strides and extents that vectors step over.
template <int kWidth, class T, class Launch>
void with_vector_width(uintptr_t alignment_bits, Launch&& launch) {
  if constexpr (kWidth > 1) {
    if (alignment_bits % (kWidth * sizeof(T)) != 0) {
      return with_vector_width<kWidth / 2, T>(alignment_bits, launch);
    }
  }
  launch(std::integral_constant<int, kWidth>{});
}

// The innermost dim of a non-contiguous plan is a row the rows kernel can
// vectorise: dense in out, and each input dense or broadcast along it.
inline bool has_dense_rows(const ElementwisePlan& plan) {
  if (plan.ndim == 0) return false;
  const int inner = plan.ndim - 1;
  if (plan.out_strides[inner] != 1) return false;
  for (int k = 0; k < plan.num_inputs; ++k) {
    if (plan.in_strides[k][inner] != 0 && plan.in_strides[k][inner] != 1) return false;
  }
  return true;
}

template <class T, class Functor, class Extents>
void launch_rows(const Functor& functor, const ElementwisePlan& plan, const Extents& extents,
                 T* out, const InputPointers<T, Functor::kNumInputs>& in, cudaStream_t stream) {
  const int inner = plan.ndim - 1;
  const int64_t row_length = plan.shape[inner];
  // Vectors must stay aligned from row to row in every operand they read or write.
  uintptr_t alignment_bits = reinterpret_cast<uintptr_t>(out) |
                             static_cast<uintptr_t>(row_length) * sizeof(T);
  for (int d = 0; d < inner; ++d) {
    alignment_bits |= static_cast<uintptr_t>(plan.out_strides[d]) * sizeof(T);
  }
  unsigned row_broadcasts = 0;
  for (int k = 0; k < Functor::kNumInputs; ++k) {
    if (plan.in_strides[k][inner] == 0) {  // read as scalars
      row_broadcasts |= 1u << k;
      continue;
    }
    alignment_bits |= reinterpret_cast<uintptr_t>(in.at[k]);
    for (int d = 0; d < inner; ++d) {
      alignment_bits |= static_cast<uintptr_t>(plan.in_strides[k][d]) * sizeof(T);
    }
  }
  with_vector_width<kMaxVectorBytes / static_cast<int>(sizeof(T)), T>(
      alignment_bits, [&](auto width) {
        constexpr int kWidth = decltype(width)::value;
        const int64_t rows = plan.numel / row_length;
        const int64_t row_vectors = row_length / kWidth;
        // Enough threads along a row to cover it in one step, the rest side by side on rows.
        int columns = 1;
        while (columns < kElementwiseThreads && columns * kElementwiseUnroll < row_vectors) {
          columns *= 2;
        }
        const dim3 block(columns, kElementwiseThreads / columns);
        constexpr int64_t kMaxGridY = 65535;
        const dim3 grid(
            static_cast<unsigned>(std::min<int64_t>(
                ceil_div(row_vectors, int64_t{columns} * kElementwiseUnroll), INT32_MAX)),
            static_cast<unsigned>(std::min(ceil_div(rows, block.y), kMaxGridY)));
        rows_kernel<kWidth><<<grid, block, 0, stream>>>(functor, plan, extents, rows,
                                                        row_vectors, row_broadcasts, out, in);
      });
}

// How contiguous plans run by default: the contiguous kernel above, and for a
// functor that moves storage (copy) the copy engine.
struct PlainContiguous {
  template <class T, class Functor>
  static oprt_status_t launch(const char* op, const Functor& functor, int64_t numel, T* out,
                              const InputPointers<T, Functor::kNumInputs>& in,
                              uintptr_t address_bits, cudaStream_t stream) {
    if constexpr (moves_storage<Functor>::value) {
      // A dense copy is a byte copy; the copy engine path is as fast as any
      // kernel and is captured into CUDA graphs as a memcpy node.
      if (out != in.at[0]) {
        const cudaError_t error =
            cudaMemcpyAsync(out, in.at[0], static_cast<size_t>(numel) * sizeof(T),
                            cudaMemcpyDeviceToDevice, stream);
        if (error != cudaSuccess) {
          return fail(OPRT_ERR_RUNTIME, "%s: device copy failed: %s", op,
                      cudaGetErrorString(error));
        }
      }
      return OPRT_SUCCESS;
    } else {
      with_vector_width<kMaxVectorBytes / static_cast<int>(sizeof(T)), T>(
          address_bits, [&](auto width) {
            constexpr int kWidth = decltype(width)::value;
            contiguous_kernel<kWidth><<<grid_for(numel / kWidth), kElementwiseThreads, 0,
                                        stream>>>(functor, numel, out, in);
          });
      return check_launch(op);
    }
  }
};

// Contiguous plans go to Contiguous::launch; every other plan to the rows or
// strided kernel.
template <class T, class Functor, class Contiguous>
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
  if (plan.contiguous) {
    return Contiguous::launch(op, functor, plan.numel, typed_out, in, address_bits, stream);
  }
  // Indices below 2^31 divide by multiply-high; larger ones by 64-bit division.
  const bool narrow = plan.numel <= INT32_MAX;
  auto launch = [&](const auto& extents) {
    if (has_dense_rows(plan)) {
      launch_rows(functor, plan, extents, typed_out, in, stream);
    } else {
      strided_kernel<<<grid_for(plan.numel), kElementwiseThreads, 0, stream>>>(
          functor, plan, extents, typed_out, in);
    }
  };
  if (narrow) {
    launch(fast_extents(plan));
  } else {
    launch(wide_extents(plan));
  }
  return check_launch(op);
}

// The ElementwiseKernel of Functor on a CUDA-dialect GPU: launches on stream.
template <class Functor, class Contiguous = PlainContiguous>
oprt_status_t elementwise_kernel(const char* op, const ElementwisePlan& plan, const void* params,
                                 void* out, const void* const* inputs, void* stream) {
  const Functor& functor = *static_cast<const Functor*>(params);
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise<T, Functor, Contiguous>(op, functor, plan, out, inputs,
                                                      static_cast<cudaStream_t>(stream));
  });
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUDA_CUH_
