/* softmax_backward: out = y * (dy - sum(dy * y)) along one axis, the gradient of
 * softmax's input given y = softmax(x) and dy, the gradient of its output (as
 * torch._softmax_backward_data).
 *
 * dim (the axis) may be negative (counted from the end). dy, y and out have one shape and
 * one dtype (f32, f16 or bf16; computed in f32, the sum accumulated in f32 or
 * wider); any of them may have any strides, dy and y stride 0 too. out may be dy
 * or y itself (same data and strides: in place) but must not overlap either
 * otherwise. NaN and inf propagate through the sum to the whole row, as in torch.
 */
#ifndef OPERATOR_RUNTIME_OPS_SOFTMAX_BACKWARD_H_
#define OPERATOR_RUNTIME_OPS_SOFTMAX_BACKWARD_H_

#include <operator_runtime/api.h>

typedef struct oprt_softmax_backward_descriptor *oprt_softmax_backward_descriptor_t;

OPRT_API oprt_status_t oprt_create_softmax_backward_descriptor(
    oprt_softmax_backward_descriptor_t *desc, const oprt_tensor_view_t *out,
    const oprt_tensor_view_t *dy, const oprt_tensor_view_t *y, int32_t dim);
OPRT_API oprt_status_t oprt_get_softmax_backward_workspace_size(
    oprt_softmax_backward_descriptor_t desc, size_t *workspace_size);
OPRT_API oprt_status_t oprt_execute_softmax_backward(oprt_softmax_backward_descriptor_t desc,
                                                     void *workspace, size_t workspace_size,
                                                     void *out, const void *dy, const void *y,
                                                     void *stream);
OPRT_API oprt_status_t oprt_destroy_softmax_backward_descriptor(
    oprt_softmax_backward_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_SOFTMAX_BACKWARD_H_ */
