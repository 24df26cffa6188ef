/* vector_add: out = a + b, computed in f32 and rounded once to the dtype.
 *
 * out, a and b have the same dtype (f32, f16 or bf16); a and b broadcast to
 * out's shape (numpy rules) and any of them may have any strides. out must not
 * write an element twice (no stride 0) and may share memory with a or b only
 * exactly (same data, shape and strides: in place). No workspace is needed.
 */
#ifndef OPERATOR_RUNTIME_OPS_VECTOR_ADD_H_
#define OPERATOR_RUNTIME_OPS_VECTOR_ADD_H_

#include <operator_runtime/api.h>

typedef struct oprt_vector_add_descriptor *oprt_vector_add_descriptor_t;

OPRT_API oprt_status_t oprt_create_vector_add_descriptor(oprt_vector_add_descriptor_t *desc,
                                                         const oprt_tensor_view_t *out,
                                                         const oprt_tensor_view_t *a,
                                                         const oprt_tensor_view_t *b);
OPRT_API oprt_status_t oprt_get_vector_add_workspace_size(oprt_vector_add_descriptor_t desc,
                                                          size_t *bytes);
OPRT_API oprt_status_t oprt_execute_vector_add(oprt_vector_add_descriptor_t desc, void *workspace,
                                               size_t workspace_size, void *out, const void *a,
                                               const void *b, void *stream);
OPRT_API oprt_status_t oprt_destroy_vector_add_descriptor(oprt_vector_add_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_VECTOR_ADD_H_ */
