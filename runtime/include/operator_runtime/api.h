/* oprt: the C ABI shared by every operator.
 *
 * Every function is extern "C", exported with default visibility, and returns an
 * oprt_status_t unless it returns a string. On failure a thread-local message
 * says what was wrong; read it with oprt_last_error_message().
 */
#ifndef OPERATOR_RUNTIME_API_H_
#define OPERATOR_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define OPRT_EXTERN_C extern "C"
#else
#define OPRT_EXTERN_C
#endif
#define OPRT_API OPRT_EXTERN_C __attribute__((visibility("default")))

#define OPRT_MAX_DIMS 8

/* The enums below are int-sized in C. C++ gets the same representation fixed to
 * int32_t, which also makes every int32 value a valid value of the type: callers
 * can pass any code (an unknown one is then rejected with a status) without
 * undefined behaviour in the C++ that reads it. */
#ifdef __cplusplus
#define OPRT_ENUM(tag) enum tag : int32_t
#else
#define OPRT_ENUM(tag) enum tag
#endif

typedef OPRT_ENUM(oprt_status_e) {
  OPRT_SUCCESS = 0,
  OPRT_ERR_INVALID_ARG = 1,
  OPRT_ERR_UNSUPPORTED_DTYPE = 2,
  OPRT_ERR_RUNTIME = 3,
  OPRT_ERR_INSUFFICIENT_WORKSPACE = 4,
  OPRT_ERR_NOT_SUPPORTED = 5,
} oprt_status_t;

typedef OPRT_ENUM(oprt_dtype_e) {
  OPRT_DTYPE_F16 = 0,
  OPRT_DTYPE_F32 = 1,
  OPRT_DTYPE_BF16 = 2,
} oprt_dtype_t;

typedef OPRT_ENUM(oprt_backend_e) {
  OPRT_BACKEND_AUTO = 0,
  OPRT_BACKEND_NVIDIA = 1,
  OPRT_BACKEND_METAX = 2,
  OPRT_BACKEND_CPU = 3,
} oprt_backend_t;

/* A tensor as the caller lays it out: strides are in elements, not bytes.
 * Only the first ndim entries of shape and strides are read. */
typedef struct {
  void *data;
  oprt_dtype_t dtype;
  int32_t ndim;
  int64_t shape[OPRT_MAX_DIMS];
  int64_t strides[OPRT_MAX_DIMS];
} oprt_tensor_view_t;

/* Short name of a status ("OPRT_ERR_INVALID_ARG"); never NULL. */
OPRT_API const char *oprt_status_string(oprt_status_t status);

/* What the last failing call on this thread said was wrong, e.g.
 * "softmax: dim 3 out of range for ndim 2". Empty after a success. */
OPRT_API const char *oprt_last_error_message(void);

/* The backend that descriptors created on this thread by the typed
 * oprt_create_<op>_descriptor functions will use (the op table's create takes
 * it as an argument instead). The setting is thread-local, so threads choosing
 * different backends do not race. AUTO picks, at create time, the first
 * built-in GPU backend that has a device, else cpu. */
OPRT_API oprt_status_t oprt_set_backend(oprt_backend_t backend);
OPRT_API oprt_status_t oprt_get_backend(oprt_backend_t *backend);
OPRT_API const char *oprt_backend_string(oprt_backend_t backend);

/* 1 when this library was built with the backend and it can run now (a GPU
 * backend needs a device), else 0. */
OPRT_API int32_t oprt_backend_available(oprt_backend_t backend);

/* The cpu backend cuts a call's work into pieces (rows, ranges of elements) and
 * by default runs them on worker threads of its own, kept across calls. A host
 * with a thread pool of its own installs a runner instead, so that the process
 * has one pool and no two sets of threads compete for its cores: the Python
 * module installs one that runs the pieces on torch's intra-op threads
 * (at::parallel_for; torch.set_num_threads sets their number).
 * run(pieces, task, context) must call task(context, piece) once for every piece
 * in [0, pieces), in any order and on any threads, and return when all have
 * returned; threads() says how many threads run uses now (>= 1), and the
 * backend cuts at most that many pieces (OPRT_CPU_THREADS, when set, instead).
 * Pass NULL to go back to the library's own threads. The runner is read at
 * each call; both functions must stay valid until it is replaced. */
typedef void (*oprt_cpu_task_t)(void *context, int64_t piece);
typedef struct {
  int32_t (*threads)(void);
  void (*run)(int64_t pieces, oprt_cpu_task_t task, void *context);
} oprt_cpu_runner_t;
OPRT_API oprt_status_t oprt_set_cpu_runner(const oprt_cpu_runner_t *runner);

/* Bytes of one element of dtype, or 0 for an unknown dtype. */
OPRT_API size_t oprt_dtype_size(oprt_dtype_t dtype);

/* How an operator's output shape follows from its inputs, so bindings can
 * allocate outputs without knowing the operator. */
typedef OPRT_ENUM(oprt_operator_kind_e) {
  OPRT_KIND_ELEMENTWISE = 0,   /* out = broadcast of the inputs' shapes */
  OPRT_KIND_REDUCTION = 1,     /* out = input's shape without param "dim" */
  OPRT_KIND_NORMALIZATION = 2, /* out = input's shape */
} oprt_operator_kind_t;

/* A uniform view of every operator, for bindings that should not need a new
 * line per operator. params holds the operator's scalar parameters in the order
 * of param_names (relu: negative_slope; reduce_sum and softmax: dim, the axis),
 * each with its default in param_defaults. create takes the backend as an
 * argument (AUTO picks as oprt_set_backend describes); the thread's setting
 * applies only to the typed oprt_create_<op>_descriptor functions. */
typedef struct oprt_operator {
  const char *name;
  oprt_operator_kind_t kind;
  int32_t num_inputs;
  const char *const *input_names;
  int32_t num_params;
  const char *const *param_names;
  const double *param_defaults;
  oprt_status_t (*create)(void **desc, oprt_backend_t backend, const oprt_tensor_view_t *out,
                          const oprt_tensor_view_t *const *inputs, const double *params);
  oprt_status_t (*get_workspace_size)(void *desc, size_t *bytes);
  oprt_status_t (*execute)(void *desc, void *workspace, size_t workspace_size, void *out,
                           const void *const *inputs, void *stream);
  oprt_status_t (*destroy)(void *desc);
} oprt_operator_t;

/* The operator called name, or NULL (with a message) if it is not built in. */
OPRT_API const oprt_operator_t *oprt_find_operator(const char *name);
/* Number of built-in operators, and the i-th one (NULL when out of range). */
OPRT_API int32_t oprt_operator_count(void);
OPRT_API const oprt_operator_t *oprt_operator_at(int32_t index);

/* What a live descriptor will run, as create validated and laid it out, so a backend
 * outside this library (the Python TileLang kernels) can launch from the same plan.
 * Strides are in elements. Every per-dimension array lists its dims outermost first,
 * innermost last (like torch); only the first ndim entries are set, and only the first
 * num_inputs rows of in_strides. A field that does not apply to the operator's family
 * is 0. */
typedef struct {
  oprt_operator_kind_t kind; /* the operator's kind, which says the family below */
  oprt_dtype_t dtype;        /* of out and every input */
  int32_t num_inputs;        /* inputs described by in_strides and in_axis_strides: 1 or 2 */
  /* Elementwise: the iteration dims, extent-1 dims dropped, ordered by out's strides and
   * merged wherever every operand steps over two dims as over one (0 dims: one element,
   * or none). Reduction family: the rows' dims (every dim but the axis), extent-1 dims
   * dropped, ordered by the first input's strides and merged likewise; in each tensor,
   * row r starts at the dot product of r's index (row-major over shape) and its strides. */
  int32_t ndim;
  int64_t shape[OPRT_MAX_DIMS];
  int64_t out_strides[OPRT_MAX_DIMS];
  int64_t in_strides[2][OPRT_MAX_DIMS]; /* 0 along a dim that input is broadcast over */

  /* The elementwise family (OPRT_KIND_ELEMENTWISE). */
  int32_t contiguous; /* 1: every operand dense over the same numel elements in the same
                         order, none broadcast, so all can be read as flat arrays */
  int64_t numel;      /* elements of out */

  /* The reduction family (OPRT_KIND_REDUCTION and OPRT_KIND_NORMALIZATION): element i of
   * row r is at row r's offset plus i times the axis stride in each tensor. */
  int64_t rows;               /* product of shape[0..ndim) */
  int64_t row_length;         /* extent of the axis */
  int64_t in_axis_strides[2]; /* each input's stride along the axis; 1 when row_length <= 1 */
  int64_t out_axis_stride;    /* 0 when out holds one element per row (a reduction) */
  int64_t row_splits;         /* chunks a row is cut into (1 = whole rows); with
                                 splits_share_cluster 0, combined through the workspace
                                 (by a second kernel, or, on the grid path, inside one
                                 kernel whose blocks all run at once) */
  int32_t splits_share_cluster; /* 1: a row's chunks are the blocks of one thread-block
                                   cluster, which combine their partial results on chip */
} oprt_plan_t;

/* Fills plan from desc, a live descriptor of the operator called op (as created by its
 * op-table entry or typed create function). INVALID_ARG for a NULL op or plan, an op that
 * is not built in, or a desc that is null, destroyed or of another operator. */
OPRT_API oprt_status_t oprt_descriptor_plan(const char *op, const void *desc, oprt_plan_t *plan);

#endif /* OPERATOR_RUNTIME_API_H_ */
