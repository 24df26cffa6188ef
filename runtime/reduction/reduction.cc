// The host side of the reduction family: validation, the row plan, and the
// descriptor lifecycle shared by reduce_sum, softmax and softmax_backward.
#include "runtime/reduction/reduction.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace oprt {
namespace {

// Kernels move partial results in the workspace as words of up to 16 bytes.
constexpr size_t kWorkspaceAlignment = 16;

struct ReductionDescriptor final : Descriptor {
  ReductionDescriptor(const char* op_name, oprt_backend_t backend_kind)
      : Descriptor(op_name, backend_kind) {}
  void describe(oprt_plan_t* out) const override;
  const ReductionKernels* kernels = nullptr;
  ReductionPlan plan{};
  // The layouts create checked, so execute can check the pointers it gets
  // against the same overlap rules.
  oprt_tensor_view_t out_view{};
  oprt_tensor_view_t in_views[kMaxReductionInputs]{};
};

bool keeps_axis_in_out(const ReductionOp& op) { return op.kind == OPRT_KIND_NORMALIZATION; }

// out's shape for a reduction: in's shape without the axis, or with 1 there.
bool is_reduced_shape(const oprt_tensor_view_t& out, const oprt_tensor_view_t& in, int32_t axis) {
  if (out.ndim == in.ndim - 1) {
    for (int32_t d = 0; d < out.ndim; ++d) {
      if (out.shape[d] != in.shape[d < axis ? d : d + 1]) return false;
    }
    return true;
  }
  if (out.ndim == in.ndim) {
    for (int32_t d = 0; d < out.ndim; ++d) {
      if (out.shape[d] != (d == axis ? 1 : in.shape[d])) return false;
    }
    return true;
  }
  return false;
}

bool is_same_shape(const oprt_tensor_view_t& out, const oprt_tensor_view_t& in) {
  if (out.ndim != in.ndim) return false;
  for (int32_t d = 0; d < out.ndim; ++d) {
    if (out.shape[d] != in.shape[d]) return false;
  }
  return true;
}

// A normalization may run in place (out exactly aliasing an input); a
// reduction's out must not share memory with its input at all.
oprt_status_t check_overlap(const ReductionOp& op, const oprt_tensor_view_t& out,
                            const oprt_tensor_view_t* ins) {
  for (int32_t i = 0; i < op.num_inputs; ++i) {
    const Overlap shared = overlap(out, ins[i]);
    if (keeps_axis_in_out(op) && shared == Overlap::kPartial) {
      return fail(OPRT_ERR_INVALID_ARG,
                  "%s: out partially overlaps %s; in-place needs the same data, shape and strides",
                  op.name, op.input_names[i]);
    }
    if (!keeps_axis_in_out(op) && shared != Overlap::kNone) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: out overlaps %s", op.name, op.input_names[i]);
    }
  }
  return OPRT_SUCCESS;
}

oprt_status_t check_operands(const ReductionOp& op, const oprt_tensor_view_t* out,
                             const oprt_tensor_view_t* const* inputs, int64_t dim,
                             int32_t* normalized_axis) {
  OPRT_RETURN_IF_ERROR(check_view(op.name, "out", out));
  for (int32_t i = 0; i < op.num_inputs; ++i) {
    OPRT_RETURN_IF_ERROR(check_view(op.name, op.input_names[i], inputs[i]));
    if (out->dtype != inputs[i]->dtype) {
      return fail(OPRT_ERR_UNSUPPORTED_DTYPE, "%s: out dtype %s differs from %s dtype %s",
                  op.name, dtype_name(out->dtype), op.input_names[i],
                  dtype_name(inputs[i]->dtype));
    }
    if (i > 0 && !is_same_shape(*inputs[i], *inputs[0])) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: %s shape %s must equal %s shape %s", op.name,
                  op.input_names[i], shape_string(*inputs[i]), op.input_names[0],
                  shape_string(*inputs[0]));
    }
  }
  const oprt_tensor_view_t* const in = inputs[0];
  if (dim < -in->ndim || dim >= in->ndim) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: dim %" PRId64 " out of range for ndim %d", op.name,
                dim, in->ndim);
  }
  *normalized_axis = static_cast<int32_t>(dim < 0 ? dim + in->ndim : dim);
  if (keeps_axis_in_out(op) && !is_same_shape(*out, *in)) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: out shape %s must equal %s shape %s", op.name,
                shape_string(*out), op.input_names[0], shape_string(*in));
  }
  if (!keeps_axis_in_out(op) && !is_reduced_shape(*out, *in, *normalized_axis)) {
    return fail(OPRT_ERR_INVALID_ARG,
                "%s: out shape %s must be input shape %s without dim %d or with 1 there",
                op.name, shape_string(*out), shape_string(*in), *normalized_axis);
  }
  if (has_internal_overlap(*out)) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: out %s has overlapping elements", op.name,
                shape_string(*out));
  }
  oprt_tensor_view_t ins[kMaxReductionInputs];
  for (int32_t i = 0; i < op.num_inputs; ++i) ins[i] = *inputs[i];
  return check_overlap(op, *out, ins);
}

struct RowDim {
  int64_t size;
  int64_t in_stride;
  int64_t second_in_stride;
  int64_t out_stride;
};

// The non-axis dimensions as rows: extent-1 dimensions dropped, the rest sorted
// so the input's smallest stride is innermost (neighbouring rows are then
// neighbours in memory, which the strided kernels rely on for coalescing), and
// merged wherever one stride steps over the other dimension in every tensor.
// second_in, when there is one, has in's shape (else it is in itself).
RowOffsets make_row_offsets(const oprt_tensor_view_t& out, const oprt_tensor_view_t& in,
                            const oprt_tensor_view_t& second_in, int32_t axis,
                            bool out_keeps_axis) {
  RowDim dims[OPRT_MAX_DIMS];
  int32_t count = 0;
  for (int32_t d = 0; d < in.ndim; ++d) {
    if (d == axis || in.shape[d] == 1) continue;
    const int32_t out_dim = (out_keeps_axis || out.ndim == in.ndim || d < axis) ? d : d - 1;
    dims[count++] =
        RowDim{in.shape[d], in.strides[d], second_in.strides[d], out.strides[out_dim]};
  }
  std::stable_sort(dims, dims + count, [](const RowDim& a, const RowDim& b) {
    if (std::llabs(a.in_stride) != std::llabs(b.in_stride)) {
      return std::llabs(a.in_stride) < std::llabs(b.in_stride);
    }
    return std::llabs(a.out_stride) < std::llabs(b.out_stride);
  });
  RowOffsets offsets{};
  for (int32_t i = 0; i < count; ++i) {
    const RowDim& dim = dims[i];
    if (offsets.ndim > 0) {
      const int32_t inner = offsets.ndim - 1;
      const int64_t inner_size = offsets.sizes[inner];
      if (dim.in_stride == offsets.in_strides[inner] * inner_size &&
          dim.second_in_stride == offsets.second_in_strides[inner] * inner_size &&
          dim.out_stride == offsets.out_strides[inner] * inner_size) {
        offsets.sizes[inner] *= dim.size;
        continue;
      }
    }
    offsets.sizes[offsets.ndim] = dim.size;
    offsets.in_strides[offsets.ndim] = dim.in_stride;
    offsets.second_in_strides[offsets.ndim] = dim.second_in_stride;
    offsets.out_strides[offsets.ndim] = dim.out_stride;
    ++offsets.ndim;
  }
  return offsets;
}

ReductionPlan make_plan(const ReductionOp& op, const oprt_tensor_view_t& out,
                        const oprt_tensor_view_t* ins, int32_t axis) {
  const bool out_keeps_axis = keeps_axis_in_out(op);
  const oprt_tensor_view_t& in = ins[0];
  const oprt_tensor_view_t& second_in = ins[op.num_inputs > 1 ? 1 : 0];
  ReductionPlan plan{};
  plan.dtype = in.dtype;
  plan.num_inputs = op.num_inputs;
  plan.row_length = in.shape[axis];
  // Along an axis of extent 1 the stride is never stepped; 1 lets such rows take the fast path.
  plan.in_axis_stride = plan.row_length > 1 ? in.strides[axis] : 1;
  plan.second_in_axis_stride = plan.row_length > 1 ? second_in.strides[axis] : 1;
  plan.out_axis_stride = !out_keeps_axis ? 0 : plan.row_length > 1 ? out.strides[axis] : 1;
  plan.row_offsets = make_row_offsets(out, in, second_in, axis, out_keeps_axis);
  plan.rows = 1;
  for (int32_t d = 0; d < plan.row_offsets.ndim; ++d) plan.rows *= plan.row_offsets.sizes[d];
  plan.row_splits = 1;
  plan.splits_share_cluster = false;
  plan.rows_per_round = 0;
  return plan;
}

using LiveReduction = LiveDescriptor<ReductionDescriptor>;

// An empty row still has a sum (0) to write, but no softmax.
bool has_no_work(const ReductionPlan& plan) {
  return plan.rows == 0 || (plan.out_axis_stride != 0 && plan.row_length == 0);
}

}  // namespace

namespace {

// Whether every row of tensors a and b (at a_address, b_address, with row
// strides a_strides, b_strides) starts at the same offset from a vector
// boundary. Row r's two starts differ by (a - b) + sum_d index_d (a_stride_d -
// b_stride_d) elements, so exactly when each term is a whole number of vectors.
bool rows_share_vector_offsets(const ReductionPlan& plan, const void* a_address,
                               const int64_t* a_strides, const void* b_address,
                               const int64_t* b_strides, size_t vector_bytes) {
  const auto element = static_cast<int64_t>(oprt_dtype_size(plan.dtype));
  const auto vector = static_cast<int64_t>(vector_bytes);
  const auto a = reinterpret_cast<uintptr_t>(a_address);
  const auto b = reinterpret_cast<uintptr_t>(b_address);
  if ((a - b) % vector_bytes != 0) return false;
  for (int32_t d = 0; d < plan.row_offsets.ndim; ++d) {
    if ((a_strides[d] - b_strides[d]) * element % vector != 0) return false;
  }
  return true;
}

}  // namespace

bool rows_take_vectors(const ReductionPlan& plan, const void* out, const void* const* inputs,
                       size_t vector_bytes) {
  const auto element = static_cast<uintptr_t>(oprt_dtype_size(plan.dtype));
  const bool writes_rows = plan.out_axis_stride != 0;
  const void* const in = inputs[0];
  if (plan.in_axis_stride != 1 || (writes_rows && plan.out_axis_stride != 1)) return false;
  if (reinterpret_cast<uintptr_t>(in) % element != 0) return false;
  const RowOffsets& offsets = plan.row_offsets;
  if (plan.num_inputs > 1 &&
      (plan.second_in_axis_stride != 1 ||
       !rows_share_vector_offsets(plan, in, offsets.in_strides, inputs[1],
                                  offsets.second_in_strides, vector_bytes))) {
    return false;
  }
  return !writes_rows || rows_share_vector_offsets(plan, in, offsets.in_strides, out,
                                                   offsets.out_strides, vector_bytes);
}

bool rows_start_on_vectors(const ReductionPlan& plan, const void* in, size_t vector_bytes) {
  const auto element = static_cast<int64_t>(oprt_dtype_size(plan.dtype));
  if (reinterpret_cast<uintptr_t>(in) % vector_bytes != 0) return false;
  for (int32_t d = 0; d < plan.row_offsets.ndim; ++d) {
    if (plan.row_offsets.in_strides[d] * element % static_cast<int64_t>(vector_bytes) != 0) {
      return false;
    }
  }
  return true;
}

bool rows_are_neighbours(const ReductionPlan& plan) {
  return plan.in_axis_stride != 1 && plan.row_offsets.ndim > 0 &&
         plan.row_offsets.in_strides[0] == 1;
}

bool columns_are_vector_aligned(const ReductionPlan& plan, const void* in, size_t vector_bytes) {
  const int64_t vector_elements =
      static_cast<int64_t>(vector_bytes / oprt_dtype_size(plan.dtype));
  const RowOffsets& offsets = plan.row_offsets;
  if (!rows_are_neighbours(plan)) return false;
  if (offsets.sizes[0] % vector_elements != 0) return false;
  if (plan.in_axis_stride % vector_elements != 0) return false;
  if (reinterpret_cast<uintptr_t>(in) % vector_bytes != 0) return false;
  for (int32_t d = 1; d < offsets.ndim; ++d) {
    if (offsets.in_strides[d] % vector_elements != 0) return false;
  }
  return true;
}

// RowOffsets lists the row dims innermost first; oprt_plan_t outermost first. A
// one-input plan's second-input strides repeat the first's and are left 0 here.
void ReductionDescriptor::describe(oprt_plan_t* out) const {
  static_assert(kMaxReductionInputs <= 2, "oprt_plan_t holds two inputs' strides");
  const RowOffsets& offsets = plan.row_offsets;
  const bool second = plan.num_inputs > 1;
  out->dtype = plan.dtype;
  out->num_inputs = plan.num_inputs;
  out->ndim = offsets.ndim;
  for (int32_t d = 0; d < offsets.ndim; ++d) {
    const int32_t inner_first = offsets.ndim - 1 - d;
    out->shape[d] = offsets.sizes[inner_first];
    out->out_strides[d] = offsets.out_strides[inner_first];
    out->in_strides[0][d] = offsets.in_strides[inner_first];
    if (second) out->in_strides[1][d] = offsets.second_in_strides[inner_first];
  }
  out->rows = plan.rows;
  out->row_length = plan.row_length;
  out->in_axis_strides[0] = plan.in_axis_stride;
  if (second) out->in_axis_strides[1] = plan.second_in_axis_stride;
  out->out_axis_stride = plan.out_axis_stride;
  out->row_splits = plan.row_splits;
  out->splits_share_cluster = plan.splits_share_cluster ? 1 : 0;
}

oprt_status_t prepare_whole_rows(ReductionPlan* plan, size_t* workspace_bytes) {
  plan->row_splits = 1;
  *workspace_bytes = 0;
  return OPRT_SUCCESS;
}

oprt_status_t create_reduction(const ReductionOp& op, oprt_backend_t requested, void** desc,
                               const oprt_tensor_view_t* out,
                               const oprt_tensor_view_t* const* inputs, int64_t dim) {
  if (desc == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: desc is null", op.name);
  *desc = nullptr;
  if (inputs == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: inputs is null", op.name);
  int32_t normalized_axis = 0;
  OPRT_RETURN_IF_ERROR(check_operands(op, out, inputs, dim, &normalized_axis));
  oprt_backend_t backend;
  const void* kernel;
  OPRT_RETURN_IF_ERROR(find_backend_kernel(op.name, requested, &backend, &kernel));
  const auto* kernels = static_cast<const ReductionKernels*>(kernel);
  oprt_tensor_view_t in_views[kMaxReductionInputs]{};
  for (int32_t i = 0; i < op.num_inputs; ++i) in_views[i] = layout_of_checked(*inputs[i]);
  ReductionPlan plan = make_plan(op, layout_of_checked(*out), in_views, normalized_axis);
  size_t workspace_bytes = 0;
  OPRT_RETURN_IF_ERROR(kernels->prepare(&plan, &workspace_bytes));
  ReductionDescriptor* created;
  OPRT_RETURN_IF_ERROR(new_descriptor(op.name, backend, &created));
  created->kernels = kernels;
  created->plan = plan;
  created->workspace_bytes = workspace_bytes;
  created->out_view = layout_of_checked(*out);
  for (int32_t i = 0; i < op.num_inputs; ++i) created->in_views[i] = in_views[i];
  return publish(created, desc);
}

oprt_status_t create_reduction_from_table(const ReductionOp& op, oprt_backend_t backend,
                                          void** desc,
                                          const oprt_tensor_view_t* out,
                                          const oprt_tensor_view_t* const* inputs, double dim) {
  // Any integer an int64 holds is a dim (out of range is said as for any other).
  if (!(dim == std::trunc(dim) && dim >= -0x1p63 && dim < 0x1p63)) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: dim must be an integer, got %g", op.name, dim);
  }
  return create_reduction(op, backend, desc, out, inputs, static_cast<int64_t>(dim));
}

oprt_status_t execute_reduction(const ReductionOp& op, void* desc, void* workspace,
                                size_t workspace_size, void* out, const void* const* inputs,
                                void* stream) {
  const LiveReduction live(desc, op.name);
  if (live.get() == nullptr) return fail_not_live(op.name);
  const ReductionPlan& plan = live->plan;
  if (has_no_work(plan)) return succeed();
  if (out == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: out is null", op.name);
  if (inputs == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: inputs is null", op.name);
  oprt_tensor_view_t out_view = live->out_view;
  out_view.data = out;
  oprt_tensor_view_t in_views[kMaxReductionInputs];
  for (int32_t i = 0; i < op.num_inputs; ++i) {
    if (inputs[i] == nullptr && plan.row_length > 0) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: %s is null", op.name, op.input_names[i]);
    }
    in_views[i] = live->in_views[i];
    in_views[i].data = const_cast<void*>(inputs[i]);
  }
  OPRT_RETURN_IF_ERROR(check_overlap(op, out_view, in_views));
  if (workspace_size < live->workspace_bytes) {
    return fail(OPRT_ERR_INSUFFICIENT_WORKSPACE,
                "%s: workspace of %zu bytes is smaller than the %zu bytes this descriptor needs",
                op.name, workspace_size, live->workspace_bytes);
  }
  if (live->workspace_bytes > 0 &&
      (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment != 0)) {
    return fail(OPRT_ERR_INVALID_ARG,
                "%s: workspace must point to %zu bytes aligned to %zu bytes", op.name,
                live->workspace_bytes, kWorkspaceAlignment);
  }
  OPRT_RETURN_IF_ERROR(live->kernels->execute(plan, workspace, out, inputs, stream));
  return succeed();
}

}  // namespace oprt
