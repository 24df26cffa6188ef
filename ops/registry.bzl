"""The operators linked into the runtime. Adding an operator adds one line here."""

OPERATORS = [
    "copy",
    "vector_add",
    "relu",
    "reduce_sum",
    "softmax",
    "relu_backward",
    "softmax_backward",
]
