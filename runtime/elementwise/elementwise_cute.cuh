// The contiguous elementwise path written with CuTe (CUTLASS's layout algebra),
// built when --@//tools/cuda:cute selects it (tools/cuda/BUILD.bazel; only then are
// the CUTLASS headers on the include path). Strided and broadcast plans stay on the
// kernels of elementwise_cuda.cuh; only contiguous plans run here, dense copies
// included (no cudaMemcpyAsync), so the CuTe copy is what the copy rows measure.
//
// A block's tile is kElementwiseUnroll rows of kElementwiseThreads vectors of kWidth
// elements (kWidth * sizeof(T) = 16 bytes when every pointer is 16-byte aligned).
// A tiled copy gives thread t the t-th vector of every row, moved by one copy atom
// (one vector load or store instruction); the last tile is predicated per vector
// against an identity tensor of coordinates, and the numel % kWidth tail elements
// are moved one by one, as in contiguous_kernel.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUTE_CUH_
#define OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUTE_CUH_

#include <cute/tensor.hpp>

#include "runtime/elementwise/elementwise_cuda.cuh"

namespace oprt {
namespace gpu {

template <int kWidth, class T, class Functor, size_t... I>
__global__ void __launch_bounds__(kElementwiseThreads)
    cute_contiguous_kernel(Functor functor, int64_t numel, T* out,
                           InputPointers<T, Functor::kNumInputs> in, std::index_sequence<I...>) {
  using namespace cute;
  constexpr int kInputs = Functor::kNumInputs;
  // One atom moves kWidth consecutive elements as one unsigned integer of their size.
  using Atom = Copy_Atom<UniversalCopy<uint_bit_t<kWidth * sizeof_bits_v<T>>>, T>;
  // Threads side by side (thread layout), each one kWidth-element vector (value layout).
  const auto tiled_copy = make_tiled_copy(Atom{}, Layout<Shape<Int<kElementwiseThreads>>>{},
                                          Layout<Shape<Int<kWidth>>>{});
  constexpr int kTile = kElementwiseThreads * kWidth * kElementwiseUnroll;
  const auto thread = tiled_copy.get_thread_slice(threadIdx.x);

  // The whole vectors of every operand, and the coordinate of each of their elements.
  const int64_t whole = numel / kWidth * kWidth;
  Tensor outputs = make_tensor(make_gmem_ptr(out), make_shape(whole));
  Tensor coordinates = make_identity_tensor(make_shape(whole));
  for (int64_t t = blockIdx.x; t * kTile < whole; t += gridDim.x) {
    // This thread's part of tile t: (vector, row), kWidth x kElementwiseUnroll elements.
    Tensor out_part = thread.partition_D(local_tile(outputs, Shape<Int<kTile>>{}, make_coord(t)));
    Tensor coordinate_part =
        thread.partition_D(local_tile(coordinates, Shape<Int<kTile>>{}, make_coord(t)));
    // A row's vector is moved if its first element lies in the array (then all of it does).
    Tensor in_array = make_tensor<bool>(make_shape(size<1>(out_part)));
    CUTE_UNROLL
    for (int row = 0; row < size(in_array); ++row) {
      in_array(row) = get<0>(coordinate_part(0, row)) < whole;
    }
    // All loads first, then all math and stores: kUnroll x kInputs vector loads in flight.
    Tensor loaded = make_tensor<T>(append(shape(out_part), Int<kInputs>{}));
    CUTE_UNROLL
    for (int k = 0; k < kInputs; ++k) {
      Tensor operand = make_tensor(make_gmem_ptr(in.at[k]), make_shape(whole));
      Tensor registers = loaded(_, _, k);
      copy_if(tiled_copy, in_array,
              thread.partition_S(local_tile(operand, Shape<Int<kTile>>{}, make_coord(t))),
              registers);
    }
    Tensor results = make_fragment_like(out_part);
    CUTE_UNROLL
    for (int i = 0; i < size(results); ++i) {
      results(i) = evaluate<T>(functor, loaded(_, _, I)(i)...);
    }
    copy_if(tiled_copy, in_array, results, out_part);
  }
  const int64_t tail = whole + threadIdx.x;
  if (blockIdx.x == 0 && tail < numel) {
    out[tail] = evaluate<T>(functor, in.at[I][tail]...);
  }
}

// Contiguous plans as CuTe tiled copies; the Contiguous policy of elementwise_kernel.
struct CuteContiguous {
  template <class T, class Functor>
  static oprt_status_t launch(const char* op, const Functor& functor, int64_t numel, T* out,
                              const InputPointers<T, Functor::kNumInputs>& in,
                              uintptr_t address_bits, cudaStream_t stream) {
    with_vector_width<kMaxVectorBytes / static_cast<int>(sizeof(T)), T>(
        address_bits, [&](auto width) {
          constexpr int kWidth = decltype(width)::value;
          cute_contiguous_kernel<kWidth><<<grid_for(numel / kWidth), kElementwiseThreads, 0,
                                           stream>>>(
              functor, numel, out, in, std::make_index_sequence<Functor::kNumInputs>{});
        });
    return check_launch(op);
  }
};

}  // namespace gpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CUTE_CUH_
