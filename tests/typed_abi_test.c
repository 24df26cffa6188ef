/* The typed C functions oprt_operator generates (ops/c_abi.bzl), compiled as C and run on
 * the cpu backend: one operator of each shape (no parameter, a float parameter, two
 * inputs, a reduction's dim, a normalization of two inputs) gives the right values,
 * create reports a bad call with a status and a message naming the op table's operand,
 * and oprt_descriptor_plan reads a typed descriptor's plan and refuses bad calls. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <operator_runtime/api.h>
#include <operator_runtime/ops/copy.h>
#include <operator_runtime/ops/reduce_sum.h>
#include <operator_runtime/ops/relu.h>
#include <operator_runtime/ops/relu_backward.h>
#include <operator_runtime/ops/softmax.h>
#include <operator_runtime/ops/softmax_backward.h>
#include <operator_runtime/ops/vector_add.h>

#include "tests/c_test_util.h"

static int near(float a, float b) { return fabsf(a - b) <= 1e-6f * (1.0f + fabsf(b)); }

/* Each operator's four functions in turn; the workspace (none here) is asked for. */
#define RUN(op, create_arguments, execute_pointers)                                  \
  do {                                                                               \
    oprt_##op##_descriptor_t desc = NULL;                                            \
    size_t bytes = 1;                                                                \
    EXPECT(oprt_create_##op##_descriptor create_arguments == OPRT_SUCCESS);          \
    EXPECT(oprt_get_##op##_workspace_size(desc, &bytes) == OPRT_SUCCESS && bytes == 0); \
    EXPECT(oprt_execute_##op execute_pointers == OPRT_SUCCESS);                      \
    EXPECT(oprt_destroy_##op##_descriptor(desc) == OPRT_SUCCESS);                    \
  } while (0)

int main(void) {
  float x[6] = {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.0f};
  float y[6] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  float out[6];
  float sums[2];
  oprt_tensor_view_t x_view = view2(x, 2, 3), y_view = view2(y, 2, 3), out_view = view2(out, 2, 3);
  oprt_tensor_view_t sums_view = view2(sums, 2, 1);
  int i;
  EXPECT(oprt_set_backend(OPRT_BACKEND_CPU) == OPRT_SUCCESS);

  RUN(copy, (&desc, &out_view, &x_view), (desc, NULL, 0, out, x, NULL));
  for (i = 0; i < 6; ++i) EXPECT(out[i] == x[i]);

  RUN(relu, (&desc, &out_view, &x_view, 0.5f), (desc, NULL, 0, out, x, NULL));
  for (i = 0; i < 6; ++i) EXPECT(out[i] == (x[i] > 0.0f ? x[i] : 0.5f * x[i]));

  RUN(vector_add, (&desc, &out_view, &x_view, &y_view), (desc, NULL, 0, out, x, y, NULL));
  for (i = 0; i < 6; ++i) EXPECT(out[i] == x[i] + 1.0f);

  RUN(relu_backward, (&desc, &out_view, &y_view, &x_view, 0.25f),
      (desc, NULL, 0, out, y, x, NULL));
  for (i = 0; i < 6; ++i) EXPECT(out[i] == (x[i] > 0.0f ? 1.0f : 0.25f));

  RUN(reduce_sum, (&desc, &sums_view, &x_view, -1), (desc, NULL, 0, sums, x, NULL));
  EXPECT(sums[0] == -3.0f && sums[1] == 6.0f);

  RUN(softmax, (&desc, &out_view, &y_view, 1), (desc, NULL, 0, out, y, NULL));
  for (i = 0; i < 6; ++i) EXPECT(near(out[i], 1.0f / 3.0f));

  /* dx = y * (dy - sum(dy * y)) with dy = y = 1: 1 - 3 = -2 everywhere. */
  RUN(softmax_backward, (&desc, &out_view, &y_view, &y_view, 1),
      (desc, NULL, 0, out, y, y, NULL));
  for (i = 0; i < 6; ++i) EXPECT(near(out[i], -2.0f));

  {
    oprt_relu_backward_descriptor_t desc = NULL;
    EXPECT(oprt_create_relu_backward_descriptor(&desc, &out_view, NULL, &x_view, 0.0f) ==
           OPRT_ERR_INVALID_ARG);
    EXPECT(desc == NULL);
    EXPECT(strcmp(oprt_last_error_message(), "relu_backward: dy view is null") == 0);
    EXPECT(oprt_create_softmax_descriptor(NULL, &out_view, &x_view, 0) == OPRT_ERR_INVALID_ARG);
    EXPECT(strcmp(oprt_last_error_message(), "softmax: desc is null") == 0);
  }

  {
    /* oprt_descriptor_plan of a typed descriptor, and its refusals. */
    oprt_reduce_sum_descriptor_t desc = NULL;
    oprt_plan_t plan;
    EXPECT(oprt_create_reduce_sum_descriptor(&desc, &sums_view, &x_view, -1) == OPRT_SUCCESS);
    memset(&plan, 0xff, sizeof plan);
    EXPECT(oprt_descriptor_plan("reduce_sum", desc, &plan) == OPRT_SUCCESS);
    EXPECT(plan.kind == OPRT_KIND_REDUCTION && plan.dtype == OPRT_DTYPE_F32);
    EXPECT(plan.num_inputs == 1 && plan.rows == 2 && plan.row_length == 3);
    EXPECT(plan.ndim == 1 && plan.shape[0] == 2 && plan.in_strides[0][0] == 3);
    EXPECT(plan.out_strides[0] == 1 && plan.in_axis_strides[0] == 1);
    EXPECT(plan.out_axis_stride == 0 && plan.row_splits == 1 && plan.splits_share_cluster == 0);
    /* What does not apply is zero: the second input, the elementwise fields. */
    EXPECT(plan.in_strides[1][0] == 0 && plan.in_axis_strides[1] == 0);
    EXPECT(plan.shape[1] == 0 && plan.contiguous == 0 && plan.numel == 0);

    EXPECT(oprt_descriptor_plan(NULL, desc, &plan) == OPRT_ERR_INVALID_ARG);
    EXPECT(strcmp(oprt_last_error_message(), "descriptor_plan: op is null") == 0);
    EXPECT(oprt_descriptor_plan("no_such_op", desc, &plan) == OPRT_ERR_INVALID_ARG);
    EXPECT(strcmp(oprt_last_error_message(),
                  "descriptor_plan: operator 'no_such_op' is not built into this library") == 0);
    EXPECT(oprt_descriptor_plan("softmax", desc, &plan) == OPRT_ERR_INVALID_ARG);
    EXPECT(strcmp(oprt_last_error_message(),
                  "softmax: descriptor is null, destroyed or not a softmax descriptor") == 0);
    EXPECT(oprt_descriptor_plan("reduce_sum", desc, NULL) == OPRT_ERR_INVALID_ARG);
    EXPECT(strcmp(oprt_last_error_message(), "reduce_sum: plan is null") == 0);
    EXPECT(oprt_destroy_reduce_sum_descriptor(desc) == OPRT_SUCCESS);
    EXPECT(oprt_descriptor_plan("reduce_sum", desc, &plan) == OPRT_ERR_INVALID_ARG);
    EXPECT(strcmp(oprt_last_error_message(),
                  "reduce_sum: descriptor is null, destroyed or not a reduce_sum descriptor") == 0);
  }

  if (failures == 0) printf("typed_abi_test: every typed function ran\n");
  return failures == 0 ? 0 : 1;
}
