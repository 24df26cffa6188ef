#include "runtime/elementwise/elementwise.h"

#include <algorithm>
#include <cinttypes>

namespace oprt {
namespace {

// The iteration space over out's dims while it is being simplified.
struct Dims {
  int ndim = 0;
  int num_inputs = 0;
  int64_t shape[OPRT_MAX_DIMS];
  int64_t out[OPRT_MAX_DIMS];
  int64_t in[kMaxElementwiseInputs][OPRT_MAX_DIMS];
};

oprt_status_t check_broadcast(const ElementwiseOp& op, const char* role,
                              const oprt_tensor_view_t& in, const oprt_tensor_view_t& out) {
  if (in.ndim > out.ndim) {
    return fail(OPRT_ERR_INVALID_ARG, "%s: %s of shape %s has more dims than %s of shape %s",
                op.name, role, shape_string(in), op.out_name, shape_string(out));
  }
  const int lead = out.ndim - in.ndim;
  for (int d = 0; d < in.ndim; ++d) {
    const int64_t extent = in.shape[d];
    const int64_t out_extent = out.shape[lead + d];
    if (extent != out_extent && extent != 1) {
      return fail(OPRT_ERR_INVALID_ARG,
                  "%s: %s of shape %s does not broadcast to %s of shape %s (dim %d: %" PRId64
                  " vs %" PRId64 ")",
                  op.name, role, shape_string(in), op.out_name, shape_string(out), lead + d,
                  extent, out_extent);
    }
  }
  return OPRT_SUCCESS;
}

// out's dims with each input's strides right-aligned to them; broadcast and
// missing dims get stride 0; dims of extent 1 are dropped.
Dims aligned_dims(const oprt_tensor_view_t& out, const oprt_tensor_view_t* const* inputs,
                  int num_inputs) {
  Dims dims;
  dims.num_inputs = num_inputs;
  for (int d = 0; d < out.ndim; ++d) {
    if (out.shape[d] == 1) continue;
    const int k = dims.ndim++;
    dims.shape[k] = out.shape[d];
    dims.out[k] = out.strides[d];
    for (int i = 0; i < num_inputs; ++i) {
      const oprt_tensor_view_t& in = *inputs[i];
      const int in_d = d - (out.ndim - in.ndim);
      dims.in[i][k] = (in_d < 0 || in.shape[in_d] == 1) ? 0 : in.strides[in_d];
    }
  }
  return dims;
}

int64_t magnitude(int64_t x) { return x < 0 ? -x : x; }

// Orders dims so out's smallest stride is innermost: whatever the inputs'
// layout, consecutive threads then write consecutive out elements.
Dims order_by_out_strides(const Dims& dims) {
  int order[OPRT_MAX_DIMS];
  for (int d = 0; d < dims.ndim; ++d) order[d] = d;
  std::stable_sort(order, order + dims.ndim, [&](int a, int b) {
    return magnitude(dims.out[a]) > magnitude(dims.out[b]);
  });
  Dims sorted = dims;
  for (int k = 0; k < dims.ndim; ++k) {
    const int d = order[k];
    sorted.shape[k] = dims.shape[d];
    sorted.out[k] = dims.out[d];
    for (int i = 0; i < dims.num_inputs; ++i) sorted.in[i][k] = dims.in[i][d];
  }
  return sorted;
}

// Merges an outer dim into the next inner one whenever every operand steps
// over the pair as over one dim (stride[outer] == stride[inner] * extent[inner]).
Dims merge_dims(const Dims& dims) {
  Dims merged = dims;
  merged.ndim = 0;
  for (int d = 0; d < dims.ndim; ++d) {
    const int k = merged.ndim - 1;
    bool mergeable = k >= 0 && merged.out[k] == dims.out[d] * dims.shape[d];
    for (int i = 0; i < dims.num_inputs && mergeable; ++i) {
      mergeable = merged.in[i][k] == dims.in[i][d] * dims.shape[d];
    }
    if (mergeable) {
      merged.shape[k] *= dims.shape[d];
      merged.out[k] = dims.out[d];
      for (int i = 0; i < dims.num_inputs; ++i) merged.in[i][k] = dims.in[i][d];
    } else {
      const int n = merged.ndim++;
      merged.shape[n] = dims.shape[d];
      merged.out[n] = dims.out[d];
      for (int i = 0; i < dims.num_inputs; ++i) merged.in[i][n] = dims.in[i][d];
    }
  }
  return merged;
}

bool is_flat(const Dims& dims) {
  if (dims.ndim == 0) return true;
  if (dims.ndim > 1 || dims.out[0] != 1) return false;
  for (int i = 0; i < dims.num_inputs; ++i) {
    if (dims.in[i][0] != 1) return false;
  }
  return true;
}

// Byte ranges [first, end) of two spans at the given bases intersect.
bool spans_intersect(const void* a, int64_t a_lo, int64_t a_hi, const void* b, int64_t b_lo,
                     int64_t b_hi, int64_t element_size) {
  const auto a_base = reinterpret_cast<intptr_t>(a);
  const auto b_base = reinterpret_cast<intptr_t>(b);
  return a_base + a_lo * element_size < b_base + (b_hi + 1) * element_size &&
         b_base + b_lo * element_size < a_base + (a_hi + 1) * element_size;
}

using LiveElementwise = LiveDescriptor<ElementwiseDescriptor>;

oprt_status_t partial_overlap(const ElementwiseOp& op, int input) {
  return fail(OPRT_ERR_INVALID_ARG,
              "%s: %s partially overlaps %s; in-place needs the same data, shape and strides",
              op.name, op.input_names[input], op.out_name);
}

}  // namespace

oprt_status_t make_elementwise_plan(const ElementwiseOp& op, const oprt_tensor_view_t* out,
                                    const oprt_tensor_view_t* const* inputs,
                                    ElementwisePlan* plan) {
  OPRT_RETURN_IF_ERROR(check_view(op.name, op.out_name, out));
  if (inputs == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: inputs is null", op.name);
  for (int i = 0; i < op.num_inputs; ++i) {
    OPRT_RETURN_IF_ERROR(check_view(op.name, op.input_names[i], inputs[i]));
  }
  for (int i = 0; i < op.num_inputs; ++i) {
    if (inputs[i]->dtype != out->dtype) {
      return fail(OPRT_ERR_UNSUPPORTED_DTYPE, "%s: %s has dtype %s but %s has dtype %s", op.name,
                  op.input_names[i], dtype_name(inputs[i]->dtype), op.out_name,
                  dtype_name(out->dtype));
    }
    OPRT_RETURN_IF_ERROR(check_broadcast(op, op.input_names[i], *inputs[i], *out));
  }
  if (has_internal_overlap(*out)) {
    return fail(OPRT_ERR_INVALID_ARG,
                "%s: %s of shape %s writes some elements more than once (stride 0 or "
                "self-overlapping strides)",
                op.name, op.out_name, shape_string(*out));
  }
  for (int i = 0; i < op.num_inputs; ++i) {
    if (overlap(*out, *inputs[i]) == Overlap::kPartial) {
      return partial_overlap(op, i);
    }
  }

  *plan = ElementwisePlan{};
  plan->num_inputs = op.num_inputs;
  plan->dtype = out->dtype;
  plan->numel = numel(*out);
  if (plan->numel == 0) {
    // Execute does nothing; an empty view's strides are unbounded, so no plan
    // arithmetic is done on them.
    plan->contiguous = true;
    return OPRT_SUCCESS;
  }
  const Dims dims = merge_dims(order_by_out_strides(aligned_dims(*out, inputs, op.num_inputs)));
  plan->ndim = dims.ndim;
  plan->contiguous = is_flat(dims);
  for (int d = 0; d < dims.ndim; ++d) {
    plan->shape[d] = dims.shape[d];
    plan->out_strides[d] = dims.out[d];
    for (int i = 0; i < op.num_inputs; ++i) plan->in_strides[i][d] = dims.in[i][d];
  }
  return OPRT_SUCCESS;
}

oprt_status_t create_elementwise(const ElementwiseOp& op, oprt_backend_t requested, void** desc,
                                 const oprt_tensor_view_t* out,
                                 const oprt_tensor_view_t* const* inputs, const void* params,
                                 size_t params_size) {
  if (desc == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: desc is null", op.name);
  *desc = nullptr;
  ElementwisePlan plan;
  OPRT_RETURN_IF_ERROR(make_elementwise_plan(op, out, inputs, &plan));
  oprt_backend_t backend;
  const void* kernel;
  OPRT_RETURN_IF_ERROR(find_backend_kernel(op.name, requested, &backend, &kernel));
  ElementwiseDescriptor* created;
  OPRT_RETURN_IF_ERROR(new_descriptor(op.name, backend, &created));
  created->plan = plan;
  created->kernel = reinterpret_cast<ElementwiseKernel>(kernel);
  std::memcpy(created->params, params, params_size);
  span(*out, &created->out_lo, &created->out_hi);
  for (int i = 0; i < op.num_inputs; ++i) {
    span(*inputs[i], &created->in_lo[i], &created->in_hi[i]);
    // Asking whether in would alias out exactly if it sat at out's address
    // tells, independently of the pointers execute gets, whether in-place is safe.
    oprt_tensor_view_t moved = *inputs[i];
    moved.data = out->data;
    created->in_matches_out[i] = overlap(*out, moved) == Overlap::kExact;
  }
  return publish(created, desc);
}

oprt_status_t execute_elementwise(const ElementwiseOp& op, void* desc, void* /*workspace*/,
                                  size_t /*workspace_size*/, void* out,
                                  const void* const* inputs, void* stream) {
  // Elementwise operators need no workspace, so any workspace (or none) will do.
  const LiveElementwise d(desc, op.name);
  if (d.get() == nullptr) return fail_not_live(op.name);
  if (d->plan.numel == 0) return succeed();
  if (out == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: %s is null", op.name, op.out_name);
  if (inputs == nullptr) return fail(OPRT_ERR_INVALID_ARG, "%s: inputs is null", op.name);
  const auto element_size = static_cast<int64_t>(oprt_dtype_size(d->plan.dtype));
  for (int i = 0; i < op.num_inputs; ++i) {
    if (inputs[i] == nullptr) {
      return fail(OPRT_ERR_INVALID_ARG, "%s: %s is null", op.name, op.input_names[i]);
    }
    const bool in_place = inputs[i] == out && d->in_matches_out[i];
    if (!in_place && spans_intersect(out, d->out_lo, d->out_hi, inputs[i], d->in_lo[i],
                                     d->in_hi[i], element_size)) {
      return partial_overlap(op, i);
    }
  }
  OPRT_RETURN_IF_ERROR(d->kernel(op.name, d->plan, d->params, out, inputs, stream));
  return succeed();
}

// The plan's dims are already outermost first (ordered by out's strides, innermost last).
void ElementwiseDescriptor::describe(oprt_plan_t* out) const {
  static_assert(kMaxElementwiseInputs <= 2, "oprt_plan_t holds two inputs' strides");
  out->dtype = plan.dtype;
  out->num_inputs = plan.num_inputs;
  out->ndim = plan.ndim;
  for (int d = 0; d < plan.ndim; ++d) {
    out->shape[d] = plan.shape[d];
    out->out_strides[d] = plan.out_strides[d];
    for (int i = 0; i < plan.num_inputs; ++i) out->in_strides[i][d] = plan.in_strides[i][d];
  }
  out->contiguous = plan.contiguous ? 1 : 0;
  out->numel = plan.numel;
}

}  // namespace oprt
