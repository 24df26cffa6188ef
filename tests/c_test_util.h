/* What the C tests share: EXPECT, which counts a failure and prints the condition with
 * the library's last error message, and a contiguous f32 view of a 2-D array. */
#ifndef OPRT_TESTS_C_TEST_UTIL_H_
#define OPRT_TESTS_C_TEST_UTIL_H_

#include <stdio.h>
#include <string.h>

#include <operator_runtime/api.h>

static int failures = 0;

#define EXPECT(condition)                                               \
  do {                                                                  \
    if (!(condition)) {                                                 \
      fprintf(stderr, "%s:%d: %s (last error: %s)\n", __FILE__, __LINE__, \
              #condition, oprt_last_error_message());                   \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

/* A contiguous f32 view of data with shape (rows, columns). */
static oprt_tensor_view_t view2(float *data, int64_t rows, int64_t columns) {
  oprt_tensor_view_t view;
  memset(&view, 0, sizeof view);
  view.data = data;
  view.dtype = OPRT_DTYPE_F32;
  view.ndim = 2;
  view.shape[0] = rows;
  view.shape[1] = columns;
  view.strides[0] = columns;
  view.strides[1] = 1;
  return view;
}

#endif /* OPRT_TESTS_C_TEST_UTIL_H_ */
