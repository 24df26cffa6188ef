// softmax_backward's front end: its four C functions and its op-table entry, all
// forwarding to the reduction family's shared validation and dispatch.
#include <operator_runtime/ops/softmax_backward.h>

#include "runtime/reduction/reduction.h"

namespace {

constexpr const char* kInputNames[] = {"dy", "y"};
constexpr oprt::ReductionOp kSoftmaxBackward = {"softmax_backward", OPRT_KIND_NORMALIZATION, 2,
                                                kInputNames};
constexpr oprt_operator_t kSoftmaxBackwardEntry =
    oprt::ReductionEntry<kSoftmaxBackward>::table();
OPRT_REGISTER_OPERATOR(softmax_backward, kSoftmaxBackwardEntry);

}  // namespace

oprt_status_t oprt_create_softmax_backward_descriptor(oprt_softmax_backward_descriptor_t* desc,
                                                      const oprt_tensor_view_t* out,
                                                      const oprt_tensor_view_t* dy,
                                                      const oprt_tensor_view_t* y, int32_t dim) {
  const oprt_tensor_view_t* inputs[] = {dy, y};
  return oprt::create_reduction(kSoftmaxBackward, oprt::thread_backend(), desc, out, inputs, dim);
}

oprt_status_t oprt_get_softmax_backward_workspace_size(oprt_softmax_backward_descriptor_t desc,
                                                       size_t* workspace_size) {
  return oprt::get_reduction_workspace_size(kSoftmaxBackward, desc, workspace_size);
}

oprt_status_t oprt_execute_softmax_backward(oprt_softmax_backward_descriptor_t desc,
                                            void* workspace, size_t workspace_size, void* out,
                                            const void* dy, const void* y, void* stream) {
  const void* inputs[] = {dy, y};
  return oprt::execute_reduction(kSoftmaxBackward, desc, workspace, workspace_size, out, inputs,
                                 stream);
}

oprt_status_t oprt_destroy_softmax_backward_descriptor(oprt_softmax_backward_descriptor_t desc) {
  return oprt::destroy_reduction(kSoftmaxBackward, desc);
}
