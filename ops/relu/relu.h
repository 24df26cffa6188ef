/* relu: out = in > 0 ? in : in * negative_slope (leaky ReLU; slope 0 is ReLU).
 *
 * Computed in f32 and rounded once to the dtype; NaN propagates. out and in
 * have the same dtype (f32, f16 or bf16); in broadcasts to out's shape (numpy
 * rules) and either may have any strides. out must not write an element twice
 * (no stride 0) and may share memory with in only exactly (same data, shape and
 * strides: in place). No workspace is needed.
 */
#ifndef OPERATOR_RUNTIME_OPS_RELU_H_
#define OPERATOR_RUNTIME_OPS_RELU_H_

#include <operator_runtime/api.h>

typedef struct oprt_relu_descriptor *oprt_relu_descriptor_t;

OPRT_API oprt_status_t oprt_create_relu_descriptor(oprt_relu_descriptor_t *desc,
                                                   const oprt_tensor_view_t *out,
                                                   const oprt_tensor_view_t *in,
                                                   float negative_slope);
OPRT_API oprt_status_t oprt_get_relu_workspace_size(oprt_relu_descriptor_t desc, size_t *bytes);
OPRT_API oprt_status_t oprt_execute_relu(oprt_relu_descriptor_t desc, void *workspace,
                                         size_t workspace_size, void *out, const void *in,
                                         void *stream);
OPRT_API oprt_status_t oprt_destroy_relu_descriptor(oprt_relu_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_RELU_H_ */
