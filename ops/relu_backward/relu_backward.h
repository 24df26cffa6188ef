/* relu_backward: out = dy where x > 0, else dy * negative_slope (the gradient of
 * relu and leaky_relu with respect to x, given dy, the gradient of their output).
 *
 * As torch, whose two backward ops differ where x is NaN:
 * - negative_slope == 0 (-0.0 too) is threshold_backward(dy, x, 0): x <= 0
 *   (-0.0 and -inf included) gives +0.0 even when dy is inf or NaN; x > 0 or NaN
 *   gives dy;
 * - any other slope is leaky_relu_backward(dy, x, slope, false): x > 0 gives dy;
 *   any other x, NaN included, gives dy * slope (IEEE: NaN propagates,
 *   inf * 0.01 = inf, the product's zero carries the signs' product).
 *
 * Computed in f32 and rounded once to the dtype. out, dy and x have the same
 * dtype (f32, f16 or bf16); dy and x broadcast to out's shape (numpy rules) and
 * any operand may have any strides. out must not write an element twice (no
 * stride 0) and may share memory with an input only exactly (same data, shape and
 * strides: in place, e.g. dx written over dy). No workspace is needed.
 */
#ifndef OPERATOR_RUNTIME_OPS_RELU_BACKWARD_H_
#define OPERATOR_RUNTIME_OPS_RELU_BACKWARD_H_

#include <operator_runtime/api.h>

typedef struct oprt_relu_backward_descriptor *oprt_relu_backward_descriptor_t;

OPRT_API oprt_status_t oprt_create_relu_backward_descriptor(oprt_relu_backward_descriptor_t *desc,
                                                            const oprt_tensor_view_t *out,
                                                            const oprt_tensor_view_t *dy,
                                                            const oprt_tensor_view_t *x,
                                                            float negative_slope);
OPRT_API oprt_status_t oprt_get_relu_backward_workspace_size(oprt_relu_backward_descriptor_t desc,
                                                             size_t *bytes);
OPRT_API oprt_status_t oprt_execute_relu_backward(oprt_relu_backward_descriptor_t desc,
                                                  void *workspace, size_t workspace_size, void *out,
                                                  const void *dy, const void *x, void *stream);
OPRT_API oprt_status_t oprt_destroy_relu_backward_descriptor(oprt_relu_backward_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_RELU_BACKWARD_H_ */
