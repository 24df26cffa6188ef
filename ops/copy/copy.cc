// copy's front end: its four C functions and its op-table entry.
#include <operator_runtime/ops/copy.h>

#include "ops/copy/copy_functor.h"
#include "runtime/elementwise/elementwise.h"

namespace {

constexpr const char* kInputNames[] = {"src"};
constexpr oprt::ElementwiseOp kCopy = {"copy", "dst", 1, kInputNames, 0, nullptr, nullptr};
constexpr oprt_operator_t kCopyEntry = oprt::ElementwiseEntry<kCopy, oprt::CopyFunctor>::table();
OPRT_REGISTER_OPERATOR(copy, kCopyEntry);

}  // namespace

oprt_status_t oprt_create_copy_descriptor(oprt_copy_descriptor_t* desc,
                                          const oprt_tensor_view_t* dst,
                                          const oprt_tensor_view_t* src) {
  const oprt_tensor_view_t* inputs[] = {src};
  return oprt::create_elementwise(kCopy, oprt::thread_backend(), desc,
                                  dst, inputs, oprt::CopyFunctor{});
}

oprt_status_t oprt_get_copy_workspace_size(oprt_copy_descriptor_t desc, size_t* bytes) {
  return oprt::elementwise_workspace_size(kCopy, desc, bytes);
}

oprt_status_t oprt_execute_copy(oprt_copy_descriptor_t desc, void* workspace,
                                size_t workspace_size, void* dst, const void* src, void* stream) {
  const void* inputs[] = {src};
  return oprt::execute_elementwise(kCopy, desc, workspace, workspace_size, dst, inputs, stream);
}

oprt_status_t oprt_destroy_copy_descriptor(oprt_copy_descriptor_t desc) {
  return oprt::destroy_elementwise(kCopy, desc);
}
