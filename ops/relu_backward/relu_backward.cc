// relu_backward's front end: its four C functions and its op-table entry.
#include <operator_runtime/ops/relu_backward.h>

#include "ops/relu_backward/relu_backward_functor.h"
#include "runtime/elementwise/elementwise.h"

namespace {

constexpr const char* kInputNames[] = {"dy", "x"};
constexpr const char* kParamNames[] = {"negative_slope"};
constexpr double kParamDefaults[] = {0.0};
constexpr oprt::ElementwiseOp kReluBackward = {
    "relu_backward", "out", 2, kInputNames, 1, kParamNames, kParamDefaults};

oprt::ReluBackwardFunctor relu_backward_from_table(const double* params) {
  return oprt::ReluBackwardFunctor{static_cast<float>(params[0])};
}

constexpr oprt_operator_t kReluBackwardEntry =
    oprt::ElementwiseEntry<kReluBackward, oprt::ReluBackwardFunctor,
                           relu_backward_from_table>::table();
OPRT_REGISTER_OPERATOR(relu_backward, kReluBackwardEntry);

}  // namespace

oprt_status_t oprt_create_relu_backward_descriptor(oprt_relu_backward_descriptor_t* desc,
                                                   const oprt_tensor_view_t* out,
                                                   const oprt_tensor_view_t* dy,
                                                   const oprt_tensor_view_t* x,
                                                   float negative_slope) {
  const oprt_tensor_view_t* inputs[] = {dy, x};
  return oprt::create_elementwise(kReluBackward, oprt::thread_backend(), desc, out, inputs,
                                  oprt::ReluBackwardFunctor{negative_slope});
}

oprt_status_t oprt_get_relu_backward_workspace_size(oprt_relu_backward_descriptor_t desc,
                                                    size_t* bytes) {
  return oprt::elementwise_workspace_size(kReluBackward, desc, bytes);
}

oprt_status_t oprt_execute_relu_backward(oprt_relu_backward_descriptor_t desc, void* workspace,
                                         size_t workspace_size, void* out, const void* dy,
                                         const void* x, void* stream) {
  const void* inputs[] = {dy, x};
  return oprt::execute_elementwise(kReluBackward, desc, workspace, workspace_size, out, inputs,
                                   stream);
}

oprt_status_t oprt_destroy_relu_backward_descriptor(oprt_relu_backward_descriptor_t desc) {
  return oprt::destroy_elementwise(kReluBackward, desc);
}
