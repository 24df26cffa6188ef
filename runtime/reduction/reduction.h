// The reduction family, the machinery shared by operators that work along one axis (the
// reduction reduce_sum and the normalizations softmax and softmax_backward): a host plan
// that turns (out, inputs, dim) into rows, the descriptor and the op-table entry that the
// generated front ends (ops/c_abi.bzl) register, and the interface a backend registers.
#ifndef OPERATOR_RUNTIME_REDUCTION_REDUCTION_H_
#define OPERATOR_RUNTIME_REDUCTION_REDUCTION_H_

#include <cstddef>
#include <cstdint>

#include "runtime/core/core.h"
#include "runtime/core/numeric.h"

namespace oprt {

// Where each row starts. A row index counts over the non-axis dimensions; those
// are sorted by the input's strides (innermost first) and merged where both in
// and out allow, so a contiguous tensor has ndim <= 1 and needs no division.
// in is the operator's first input; second_in its second (softmax_backward's
// y), which has the first's shape; one-input operators leave it zero.
struct RowOffsets {
  int32_t ndim;
  int64_t sizes[OPRT_MAX_DIMS];
  int64_t in_strides[OPRT_MAX_DIMS];
  int64_t second_in_strides[OPRT_MAX_DIMS];
  int64_t out_strides[OPRT_MAX_DIMS];
};

struct RowStart {
  int64_t in;
  int64_t second_in;
  int64_t out;
};

// The element offsets of row `row`'s first element in each tensor. (Kernels of
// one-input operators never read second_in, and the compiler drops its arithmetic.)
OPRT_HOST_DEVICE inline RowStart row_start(const RowOffsets& offsets, int64_t row) {
  RowStart start{0, 0, 0};
  int32_t d = 0;
  for (; d + 1 < offsets.ndim; ++d) {
    const int64_t next = row / offsets.sizes[d];
    const int64_t index = row - next * offsets.sizes[d];
    start.in += index * offsets.in_strides[d];
    start.second_in += index * offsets.second_in_strides[d];
    start.out += index * offsets.out_strides[d];
    row = next;
  }
  // The outermost index is what remains, so a single dimension costs no division.
  if (d < offsets.ndim) {
    start.in += row * offsets.in_strides[d];
    start.second_in += row * offsets.second_in_strides[d];
    start.out += row * offsets.out_strides[d];
  }
  return start;
}

// Everything a kernel needs to find its data, passed to kernels by value.
// Element i of row r is in[row_start(r).in + i * in_axis_stride], and likewise
// for second_in and out. out_axis_stride is 0 exactly when out holds one element
// per row (reduce_sum); an out that keeps the axis never has stride 0 along it.
struct ReductionPlan {
  oprt_dtype_t dtype;
  int32_t num_inputs;  // 1, or 2 with second_in
  int64_t rows;
  int64_t row_length;
  int64_t in_axis_stride;
  int64_t second_in_axis_stride;
  int64_t out_axis_stride;
  // Rows at one uniform stride (contiguous or padded rows) leave a single
  // dimension here, so row_start is one multiplication on the fast paths.
  RowOffsets row_offsets;
  // Chunks each row is cut into, reduced independently and then combined
  // through the workspace: the backend chooses it at create time (1 = whole rows).
  int64_t row_splits;
  // Set instead when a row's row_splits chunks are held on chip by the blocks of
  // one thread-block cluster, which combine their partial results themselves.
  bool splits_share_cluster;
  // Set instead (the grid path, cluster_cuda.cuh) to the rows the whole grid
  // holds on chip at once, each cut into row_splits chunks of co-resident blocks
  // that combine their partial results through the workspace inside one
  // kernel; 0 otherwise.
  int64_t rows_per_round;
};

// True when a kernel may walk the rows in aligned vectors of `vector_bytes`
// (RowWalk in reduction_cuda.cuh): the axis has stride 1 in every input (and in
// out when out keeps it), the inputs are aligned to their element size, and
// every row of out and of a second input starts at the same offset from a
// vector boundary as its row of in, so that each aligned vector of an input row
// maps to one aligned vector of the other rows. Rows may have any length and
// start anywhere else. inputs holds plan.num_inputs pointers.
bool rows_take_vectors(const ReductionPlan& plan, const void* out, const void* const* inputs,
                       size_t vector_bytes);

// True when every row of in starts on a `vector_bytes` boundary.
bool rows_start_on_vectors(const ReductionPlan& plan, const void* in, size_t vector_bytes);

// True when the axis is not the stride-1 one but the rows' innermost dimension is
// (a leading or middle axis of a contiguous input): neighbouring rows are then
// neighbours in memory, and backends walk the axis for several of them at once,
// a line of sizes[0] rows at a time.
bool rows_are_neighbours(const ReductionPlan& plan);

// True when the rows are the innermost input dimension (stride 1) and every
// `vector_bytes` group of neighbouring rows lies in one aligned vector at every
// position along the axis, so a kernel may load several rows' elements at once.
bool columns_are_vector_aligned(const ReductionPlan& plan, const void* in, size_t vector_bytes);

// What a backend registers for a reduction-family operator (with
// OPRT_REGISTER_KERNEL, as a pointer to a static instance).
struct ReductionKernels {
  // Called once by create: sets plan->row_splits for the current device and
  // returns the workspace the plan then needs.
  oprt_status_t (*prepare)(ReductionPlan* plan, size_t* workspace_bytes);
  // Launches on stream; workspace holds at least what prepare asked for, and
  // inputs plan.num_inputs pointers.
  oprt_status_t (*execute)(const ReductionPlan& plan, void* workspace, void* out,
                           const void* const* inputs, void* stream);
};

// prepare for backends that process whole rows and need no workspace.
oprt_status_t prepare_whole_rows(ReductionPlan* plan, size_t* workspace_bytes);

constexpr const char* kOneInputName[] = {"input"};
// The most inputs an operator of the family takes (a plan holds two inputs' strides).
constexpr int32_t kMaxReductionInputs = 2;

// An operator of the family: its name, kind and inputs decide the rules create
// checks. OPRT_KIND_REDUCTION: one input; out is its shape with the axis removed
// or kept as 1, and must not share memory with it. OPRT_KIND_NORMALIZATION: one
// or two inputs of one shape, which out has too; out may alias an input exactly
// (in place), because every kernel reads all of a row's elements it needs before
// it writes any element of that row that they depend on.
struct ReductionOp {
  const char* name;
  oprt_operator_kind_t kind;
  int32_t num_inputs = 1;
  const char* const* input_names = kOneInputName;
};

oprt_status_t create_reduction(const ReductionOp& op, oprt_backend_t backend, void** desc,
                               const oprt_tensor_view_t* out,
                               const oprt_tensor_view_t* const* inputs, int64_t dim);
oprt_status_t execute_reduction(const ReductionOp& op, void* desc, void* workspace,
                                size_t workspace_size, void* out, const void* const* inputs,
                                void* stream);

// create for the op table, whose "dim" arrives as a double: it must be integral.
oprt_status_t create_reduction_from_table(const ReductionOp& op, oprt_backend_t backend,
                                          void** desc,
                                          const oprt_tensor_view_t* out,
                                          const oprt_tensor_view_t* const* inputs, double dim);

// The op-table entry of a reduction-family operator: its inputs and one
// parameter, "dim" (the axis; the default, -1, when params is NULL).
template <const ReductionOp& kOp>
struct ReductionEntry {
  static_assert(kOp.num_inputs >= 1 && kOp.num_inputs <= kMaxReductionInputs,
                "a reduction-family operator takes one input or two");
  static_assert(kOp.num_inputs == 1 || kOp.kind == OPRT_KIND_NORMALIZATION,
                "only a normalization takes a second input (of the first's shape)");
  static oprt_status_t create(void** desc, oprt_backend_t backend, const oprt_tensor_view_t* out,
                              const oprt_tensor_view_t* const* inputs, const double* params) {
    return create_reduction_from_table(kOp, backend, desc, out, inputs,
                                       (params != nullptr ? params : kParamDefaults)[0]);
  }
  static oprt_status_t get_workspace_size(void* desc, size_t* bytes) {
    return descriptor_workspace_size(kOp.name, desc, bytes);
  }
  static oprt_status_t execute(void* desc, void* workspace, size_t workspace_size, void* out,
                               const void* const* inputs, void* stream) {
    if (inputs == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: inputs is null", kOp.name);
    return execute_reduction(kOp, desc, workspace, workspace_size, out, inputs, stream);
  }
  static oprt_status_t destroy(void* desc) { return destroy_descriptor(kOp.name, desc); }

  static constexpr const char* kParamNames[] = {"dim"};
  static constexpr double kParamDefaults[] = {-1.0};

  static constexpr oprt_operator_t table() {
    return oprt_operator_t{kOp.name,        kOp.kind,       kOp.num_inputs, kOp.input_names,
                           1,               kParamNames,    kParamDefaults, &create,
                           &get_workspace_size, &execute,   &destroy};
  }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_REDUCTION_REDUCTION_H_
