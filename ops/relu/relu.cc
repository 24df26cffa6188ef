// relu's front end: its four C functions and its op-table entry.
#include <operator_runtime/ops/relu.h>

#include "ops/relu/relu_functor.h"
#include "runtime/elementwise/elementwise.h"

namespace {

constexpr const char* kInputNames[] = {"input"};
constexpr const char* kParamNames[] = {"negative_slope"};
constexpr double kParamDefaults[] = {0.0};
constexpr oprt::ElementwiseOp kRelu = {"relu", "out",       1,           kInputNames,
                                       1,      kParamNames, kParamDefaults};

oprt::ReluFunctor relu_from_table(const double* params) {
  return oprt::ReluFunctor{static_cast<float>(params[0])};
}

constexpr oprt_operator_t kReluEntry =
    oprt::ElementwiseEntry<kRelu, oprt::ReluFunctor, relu_from_table>::table();
OPRT_REGISTER_OPERATOR(relu, kReluEntry);

}  // namespace

oprt_status_t oprt_create_relu_descriptor(oprt_relu_descriptor_t* desc,
                                          const oprt_tensor_view_t* out,
                                          const oprt_tensor_view_t* in, float negative_slope) {
  const oprt_tensor_view_t* inputs[] = {in};
  return oprt::create_elementwise(kRelu, oprt::thread_backend(), desc,
                                  out, inputs, oprt::ReluFunctor{negative_slope});
}

oprt_status_t oprt_get_relu_workspace_size(oprt_relu_descriptor_t desc, size_t* bytes) {
  return oprt::elementwise_workspace_size(kRelu, desc, bytes);
}

oprt_status_t oprt_execute_relu(oprt_relu_descriptor_t desc, void* workspace,
                                size_t workspace_size, void* out, const void* in, void* stream) {
  const void* inputs[] = {in};
  return oprt::execute_elementwise(kRelu, desc, workspace, workspace_size, out, inputs, stream);
}

oprt_status_t oprt_destroy_relu_descriptor(oprt_relu_descriptor_t desc) {
  return oprt::destroy_elementwise(kRelu, desc);
}
