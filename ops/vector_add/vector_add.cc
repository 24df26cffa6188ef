// vector_add's front end: its four C functions and its op-table entry.
#include <operator_runtime/ops/vector_add.h>

#include "ops/vector_add/vector_add_functor.h"
#include "runtime/elementwise/elementwise.h"

namespace {

constexpr const char* kInputNames[] = {"a", "b"};
constexpr oprt::ElementwiseOp kVectorAdd = {"vector_add", "out", 2,      kInputNames,
                                            0,            nullptr, nullptr};
constexpr oprt_operator_t kVectorAddEntry =
    oprt::ElementwiseEntry<kVectorAdd, oprt::VectorAddFunctor>::table();
OPRT_REGISTER_OPERATOR(vector_add, kVectorAddEntry);

}  // namespace

oprt_status_t oprt_create_vector_add_descriptor(oprt_vector_add_descriptor_t* desc,
                                                const oprt_tensor_view_t* out,
                                                const oprt_tensor_view_t* a,
                                                const oprt_tensor_view_t* b) {
  const oprt_tensor_view_t* inputs[] = {a, b};
  return oprt::create_elementwise(kVectorAdd, oprt::thread_backend(), desc,
                                  out, inputs, oprt::VectorAddFunctor{});
}

oprt_status_t oprt_get_vector_add_workspace_size(oprt_vector_add_descriptor_t desc,
                                                 size_t* bytes) {
  return oprt::elementwise_workspace_size(kVectorAdd, desc, bytes);
}

oprt_status_t oprt_execute_vector_add(oprt_vector_add_descriptor_t desc, void* workspace,
                                      size_t workspace_size, void* out, const void* a,
                                      const void* b, void* stream) {
  const void* inputs[] = {a, b};
  return oprt::execute_elementwise(kVectorAdd, desc, workspace, workspace_size, out, inputs,
                                   stream);
}

oprt_status_t oprt_destroy_vector_add_descriptor(oprt_vector_add_descriptor_t desc) {
  return oprt::destroy_elementwise(kVectorAdd, desc);
}
