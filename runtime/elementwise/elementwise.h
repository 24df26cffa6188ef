// The host side every elementwise operator shares: validation and the launch
// plan, the generic descriptor, and the glue from an operator's four C
// functions and its op-table entry to its backend kernel.
//
// An operator supplies a functor (its math, in f32) and a small ElementwiseOp
// record, which oprt_operator (ops/defs.bzl) generates with its front end.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_H_
#define OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "runtime/core/core.h"
#include "runtime/elementwise/functor.h"

namespace oprt {

constexpr int kMaxElementwiseInputs = 2;

// What a kernel needs to know about one launch, passed to it by value: the
// iteration space after validation, with dims of extent 1 dropped, dims
// ordered by out's strides (innermost last) and mergeable dims merged.
// Strides are in elements; a broadcast input has stride 0 along that dim.
struct ElementwisePlan {
  int32_t ndim;
  int32_t num_inputs;
  oprt_dtype_t dtype;
  // Every operand dense and row-major over the same elements, no broadcast:
  // the kernel may treat all of them as flat arrays of numel elements.
  bool contiguous;
  int64_t numel;
  int64_t shape[OPRT_MAX_DIMS];
  int64_t out_strides[OPRT_MAX_DIMS];
  int64_t in_strides[kMaxElementwiseInputs][OPRT_MAX_DIMS];
};
static_assert(std::is_trivially_copyable<ElementwisePlan>::value, "passed by value to kernels");

// A backend's entry point for one operator. params points at the operator's
// functor (a small POD); op names the operator in error messages.
using ElementwiseKernel = oprt_status_t (*)(const char* op, const ElementwisePlan& plan,
                                            const void* params, void* out,
                                            const void* const* inputs, void* stream);

// What the shared glue needs to know about an operator.
struct ElementwiseOp {
  const char* name;
  const char* out_name;  // "dst" for copy, "out" otherwise
  int32_t num_inputs;
  const char* const* input_names;
  int32_t num_params;
  const char* const* param_names;
  const double* param_defaults;
};

// Validates out and inputs for op and builds the plan: every view checked,
// one dtype for all, each input broadcastable to out, out free of internal
// overlap, and every input either disjoint from out or exactly aliasing it.
oprt_status_t make_elementwise_plan(const ElementwiseOp& op, const oprt_tensor_view_t* out,
                                    const oprt_tensor_view_t* const* inputs, ElementwisePlan* plan);

constexpr size_t kMaxElementwiseParamBytes = 32;

struct ElementwiseDescriptor : Descriptor {
  ElementwiseDescriptor(const char* op_name, oprt_backend_t backend_kind)
      : Descriptor(op_name, backend_kind) {}
  void describe(oprt_plan_t* out) const override;
  ElementwisePlan plan{};
  ElementwiseKernel kernel = nullptr;
  alignas(8) unsigned char params[kMaxElementwiseParamBytes] = {};
  // Element-offset span of out and of each input, so execute can refuse
  // rebound pointers that overlap out other than exactly in place.
  int64_t out_lo = 0, out_hi = -1;
  int64_t in_lo[kMaxElementwiseInputs] = {}, in_hi[kMaxElementwiseInputs] = {};
  bool in_matches_out[kMaxElementwiseInputs] = {};  // same strides over out: in-place safe
};

// Plans, resolves the backend and its kernel, and returns a live descriptor.
oprt_status_t create_elementwise(const ElementwiseOp& op, oprt_backend_t backend, void** desc,
                                 const oprt_tensor_view_t* out,
                                 const oprt_tensor_view_t* const* inputs, const void* params,
                                 size_t params_size);

// Checks the functor fits the descriptor, creates, and stops a scaffolded operator
// whose functor is not written yet.
template <class Functor>
oprt_status_t create_elementwise(const ElementwiseOp& op, oprt_backend_t backend, void** desc,
                                 const oprt_tensor_view_t* out,
                                 const oprt_tensor_view_t* const* inputs, const Functor& functor) {
  static_assert(std::is_trivially_copyable<Functor>::value, "functors travel by value");
  static_assert(sizeof(Functor) <= kMaxElementwiseParamBytes, "functor too large");
  OPRT_RETURN_IF_ERROR(
      create_elementwise(op, backend, desc, out, inputs, &functor, sizeof(Functor)));
  if constexpr (not_implemented<Functor>::value) {
    // Every valid call stops here, whatever the backend, after the views' own errors.
    destroy_descriptor(op.name, *desc);
    *desc = nullptr;
    return fail_not_implemented(op.name);
  }
  return OPRT_SUCCESS;
}

// An operator's functor from the table's values: its fields are the operator's
// parameters, floats in the order of op.param_names.
template <class Functor, size_t... kIndex>
Functor functor_from_params(const double* params, std::index_sequence<kIndex...>) {
  return Functor{static_cast<float>(params[kIndex])...};
}

oprt_status_t execute_elementwise(const ElementwiseOp& op, void* desc, void* workspace,
                                  size_t workspace_size, void* out, const void* const* inputs,
                                  void* stream);

// The op-table entry of an elementwise operator (the defaults when the caller
// passes no params).
template <const ElementwiseOp& kOp, class Functor>
struct ElementwiseEntry {
  static oprt_status_t create(void** desc, oprt_backend_t backend, const oprt_tensor_view_t* out,
                              const oprt_tensor_view_t* const* inputs, const double* params) {
    return create_elementwise(
        kOp, backend, desc, out, inputs,
        functor_from_params<Functor>(params != nullptr ? params : kOp.param_defaults,
                                     std::make_index_sequence<kOp.num_params>{}));
  }
  static oprt_status_t get_workspace_size(void* desc, size_t* bytes) {
    return descriptor_workspace_size(kOp.name, desc, bytes);
  }
  static oprt_status_t execute(void* desc, void* workspace, size_t workspace_size, void* out,
                               const void* const* inputs, void* stream) {
    return execute_elementwise(kOp, desc, workspace, workspace_size, out, inputs, stream);
  }
  static oprt_status_t destroy(void* desc) { return destroy_descriptor(kOp.name, desc); }

  static constexpr oprt_operator_t table() {
    return oprt_operator_t{kOp.name,         OPRT_KIND_ELEMENTWISE, kOp.num_inputs,
                           kOp.input_names,  kOp.num_params,        kOp.param_names,
                           kOp.param_defaults, &create,             &get_workspace_size,
                           &execute,         &destroy};
  }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_H_
