/* oprt_set_cpu_runner from C: the cpu backend runs a call's pieces on the runner a host
 * installs (here one that runs them on the calling thread, last first), as many pieces
 * as the runner's threads() allows, with the same results; NULL gives the pieces back
 * to the library's own threads; a runner missing a function is refused with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <operator_runtime/api.h>
#include <operator_runtime/ops/relu.h>
#include <operator_runtime/ops/softmax.h>

#include "tests/c_test_util.h"

static int runs = 0;
static int64_t last_pieces = 0;

static int32_t four_threads(void) { return 4; }

static void run_last_first(int64_t pieces, oprt_cpu_task_t task, void *context) {
  int64_t piece;
  ++runs;
  last_pieces = pieces;
  for (piece = pieces - 1; piece >= 0; --piece) task(context, piece);
}

/* relu and softmax over 64 rows of 4096 (2^18 elements: four pieces of 2^16). */
enum { kRows = 64, kColumns = 4096, kElements = kRows * kColumns };

static void run_ops_and_check(float *x, float *out) {
  oprt_tensor_view_t x_view = view2(x, kRows, kColumns), out_view = view2(out, kRows, kColumns);
  oprt_relu_descriptor_t relu = NULL;
  oprt_softmax_descriptor_t softmax = NULL;
  int64_t i;
  EXPECT(oprt_create_relu_descriptor(&relu, &out_view, &x_view, 0.0f) == OPRT_SUCCESS);
  EXPECT(oprt_execute_relu(relu, NULL, 0, out, x, NULL) == OPRT_SUCCESS);
  for (i = 0; i < kElements; ++i) {
    if (out[i] != (x[i] > 0.0f ? x[i] : 0.0f)) {
      EXPECT(out[i] == (x[i] > 0.0f ? x[i] : 0.0f));
      break;
    }
  }
  EXPECT(oprt_destroy_relu_descriptor(relu) == OPRT_SUCCESS);
  /* Every row of x is 0..4095 scaled, so every row's softmax is the same. */
  EXPECT(oprt_create_softmax_descriptor(&softmax, &out_view, &x_view, 1) == OPRT_SUCCESS);
  EXPECT(oprt_execute_softmax(softmax, NULL, 0, out, x, NULL) == OPRT_SUCCESS);
  for (i = kColumns; i < kElements; ++i) {
    if (out[i] != out[i % kColumns]) {
      EXPECT(out[i] == out[i % kColumns]);
      break;
    }
  }
  EXPECT(fabsf(out[kColumns - 1] / out[kColumns - 2] - expf(1.0f / 64.0f)) < 1e-5f);
  EXPECT(oprt_destroy_softmax_descriptor(softmax) == OPRT_SUCCESS);
}

int main(void) {
  float *x = malloc(sizeof(float) * kElements);
  float *out = malloc(sizeof(float) * kElements);
  oprt_cpu_runner_t runner = {four_threads, run_last_first};
  oprt_cpu_runner_t half = {NULL, run_last_first};
  int64_t i;
  if (x == NULL || out == NULL) return 2;
  for (i = 0; i < kElements; ++i) x[i] = (float)(i % kColumns - kColumns / 2) / 64.0f;
  EXPECT(oprt_set_backend(OPRT_BACKEND_CPU) == OPRT_SUCCESS);

  EXPECT(oprt_set_cpu_runner(&half) == OPRT_ERR_INVALID_ARG);
  EXPECT(strcmp(oprt_last_error_message(), "set_cpu_runner: threads and run must both be set") ==
         0);

  EXPECT(oprt_set_cpu_runner(&runner) == OPRT_SUCCESS);
  EXPECT(strcmp(oprt_last_error_message(), "") == 0);
  run_ops_and_check(x, out);
  EXPECT(runs == 2 && last_pieces == 4);

  EXPECT(oprt_set_cpu_runner(NULL) == OPRT_SUCCESS);
  run_ops_and_check(x, out);
  EXPECT(runs == 2);

  free(x);
  free(out);
  if (failures == 0) printf("cpu runner: passed\n");
  return failures == 0 ? 0 : 1;
}
