// reduce_sum's front end: its four C functions and its op-table entry, all
// forwarding to the reduction family's shared validation and dispatch.
#include <operator_runtime/ops/reduce_sum.h>

#include "runtime/reduction/reduction.h"

namespace {

constexpr oprt::ReductionOp kReduceSum = {"reduce_sum", OPRT_KIND_REDUCTION};
constexpr oprt_operator_t kReduceSumEntry = oprt::ReductionEntry<kReduceSum>::table();
OPRT_REGISTER_OPERATOR(reduce_sum, kReduceSumEntry);

}  // namespace

oprt_status_t oprt_create_reduce_sum_descriptor(oprt_reduce_sum_descriptor_t* desc,
                                                const oprt_tensor_view_t* out,
                                                const oprt_tensor_view_t* in, int32_t dim) {
  const oprt_tensor_view_t* inputs[] = {in};
  return oprt::create_reduction(kReduceSum, oprt::thread_backend(), desc, out, inputs, dim);
}

oprt_status_t oprt_get_reduce_sum_workspace_size(oprt_reduce_sum_descriptor_t desc,
                                                 size_t* workspace_size) {
  return oprt::get_reduction_workspace_size(kReduceSum, desc, workspace_size);
}

oprt_status_t oprt_execute_reduce_sum(oprt_reduce_sum_descriptor_t desc, void* workspace,
                                      size_t workspace_size, void* out, const void* in,
                                      void* stream) {
  const void* inputs[] = {in};
  return oprt::execute_reduction(kReduceSum, desc, workspace, workspace_size, out, inputs, stream);
}

oprt_status_t oprt_destroy_reduce_sum_descriptor(oprt_reduce_sum_descriptor_t desc) {
  return oprt::destroy_reduction(kReduceSum, desc);
}
