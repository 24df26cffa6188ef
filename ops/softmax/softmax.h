/* softmax: out = exp(in - max) / sum(exp(in - max)) along one axis.
 *
 * dim (the axis) may be negative (counted from the end). out has in's shape and dtype
 * (f32, f16 or bf16; computed in f32); both may have any strides. out may be in
 * itself (same data and strides: in-place) but must not overlap it otherwise.
 * A row whose entries are all -inf gives NaN, as in PyTorch.
 */
#ifndef OPERATOR_RUNTIME_OPS_SOFTMAX_H_
#define OPERATOR_RUNTIME_OPS_SOFTMAX_H_

#include <operator_runtime/api.h>

typedef struct oprt_softmax_descriptor *oprt_softmax_descriptor_t;

OPRT_API oprt_status_t oprt_create_softmax_descriptor(oprt_softmax_descriptor_t *desc,
                                                      const oprt_tensor_view_t *out,
                                                      const oprt_tensor_view_t *in, int32_t dim);
OPRT_API oprt_status_t oprt_get_softmax_workspace_size(oprt_softmax_descriptor_t desc,
                                                       size_t *workspace_size);
OPRT_API oprt_status_t oprt_execute_softmax(oprt_softmax_descriptor_t desc, void *workspace,
                                            size_t workspace_size, void *out, const void *in,
                                            void *stream);
OPRT_API oprt_status_t oprt_destroy_softmax_descriptor(oprt_softmax_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_SOFTMAX_H_ */
