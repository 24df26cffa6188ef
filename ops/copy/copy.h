/* copy: dst = src, element for element.
 *
 * dst and src have the same dtype (f32, f16 or bf16); src broadcasts to dst's
 * shape (numpy rules) and either may have any strides. dst must not write an
 * element twice (no stride 0) and may share memory with src only exactly
 * (same data, shape and strides). No workspace is needed.
 */
#ifndef OPERATOR_RUNTIME_OPS_COPY_H_
#define OPERATOR_RUNTIME_OPS_COPY_H_

#include <operator_runtime/api.h>

typedef struct oprt_copy_descriptor *oprt_copy_descriptor_t;

OPRT_API oprt_status_t oprt_create_copy_descriptor(oprt_copy_descriptor_t *desc,
                                                   const oprt_tensor_view_t *dst,
                                                   const oprt_tensor_view_t *src);
OPRT_API oprt_status_t oprt_get_copy_workspace_size(oprt_copy_descriptor_t desc, size_t *bytes);
OPRT_API oprt_status_t oprt_execute_copy(oprt_copy_descriptor_t desc, void *workspace,
                                         size_t workspace_size, void *dst, const void *src,
                                         void *stream);
OPRT_API oprt_status_t oprt_destroy_copy_descriptor(oprt_copy_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_COPY_H_ */
