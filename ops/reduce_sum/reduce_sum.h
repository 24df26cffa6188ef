/* reduce_sum: out = the sum of in along one axis.
 *
 * dim (the axis) may be negative (counted from the end). out has in's shape with the axis
 * removed or kept as 1; in and out may have any strides, share one dtype (f32,
 * f16 or bf16; 16-bit types accumulate in f32) and must not overlap. A row of
 * length 0 sums to 0.
 */
#ifndef OPERATOR_RUNTIME_OPS_REDUCE_SUM_H_
#define OPERATOR_RUNTIME_OPS_REDUCE_SUM_H_

#include <operator_runtime/api.h>

typedef struct oprt_reduce_sum_descriptor *oprt_reduce_sum_descriptor_t;

OPRT_API oprt_status_t oprt_create_reduce_sum_descriptor(oprt_reduce_sum_descriptor_t *desc,
                                                         const oprt_tensor_view_t *out,
                                                         const oprt_tensor_view_t *in,
                                                         int32_t dim);
OPRT_API oprt_status_t oprt_get_reduce_sum_workspace_size(oprt_reduce_sum_descriptor_t desc,
                                                          size_t *workspace_size);
OPRT_API oprt_status_t oprt_execute_reduce_sum(oprt_reduce_sum_descriptor_t desc, void *workspace,
                                               size_t workspace_size, void *out, const void *in,
                                               void *stream);
OPRT_API oprt_status_t oprt_destroy_reduce_sum_descriptor(oprt_reduce_sum_descriptor_t desc);

#endif /* OPERATOR_RUNTIME_OPS_REDUCE_SUM_H_ */
