// softmax's front end: its four C functions and its op-table entry, all
// forwarding to the reduction family's shared validation and dispatch.
#include <operator_runtime/ops/softmax.h>

#include "runtime/reduction/reduction.h"

namespace {

constexpr oprt::ReductionOp kSoftmax = {"softmax", OPRT_KIND_NORMALIZATION};
constexpr oprt_operator_t kSoftmaxEntry = oprt::ReductionEntry<kSoftmax>::table();
OPRT_REGISTER_OPERATOR(softmax, kSoftmaxEntry);

}  // namespace

oprt_status_t oprt_create_softmax_descriptor(oprt_softmax_descriptor_t* desc,
                                                const oprt_tensor_view_t* out,
                                                const oprt_tensor_view_t* in, int32_t dim) {
  const oprt_tensor_view_t* inputs[] = {in};
  return oprt::create_reduction(kSoftmax, oprt::thread_backend(), desc, out, inputs, dim);
}

oprt_status_t oprt_get_softmax_workspace_size(oprt_softmax_descriptor_t desc,
                                                 size_t* workspace_size) {
  return oprt::get_reduction_workspace_size(kSoftmax, desc, workspace_size);
}

oprt_status_t oprt_execute_softmax(oprt_softmax_descriptor_t desc, void* workspace,
                                      size_t workspace_size, void* out, const void* in,
                                      void* stream) {
  const void* inputs[] = {in};
  return oprt::execute_reduction(kSoftmax, desc, workspace, workspace_size, out, inputs, stream);
}

oprt_status_t oprt_destroy_softmax_descriptor(oprt_softmax_descriptor_t desc) {
  return oprt::destroy_reduction(kSoftmax, desc);
}
