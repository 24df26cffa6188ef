"""operator_runtime: fast memory-bound operators on CPU, NVIDIA, MetaX and TileLang.

    import operator_runtime as ort
    y = ort.softmax(x, dim=-1)                  # out-of-place, backend from x's device
    ort.softmax_(out, x, dim=-1)                # writes into out
    with ort.prepare_softmax(out, x) as p:      # descriptor and workspace reused
        p.run(); p.run(x2)

Every operator of the C runtime gets the same trio (copy, vector_add, relu,
reduce_sum, softmax, ...); see ``operators()``. ``op`` and ``op_`` are also
``torch.ops.oprt.op`` and ``torch.ops.oprt.op_out`` (see ``library``), and
share a bounded cache of descriptors (``descriptor_cache_info()``).
"""

from operator_runtime._internal.torch_release import check_torch_release

check_torch_release()  # before anything loads _C, which binds to one torch release

from operator_runtime import ops as _ops
from operator_runtime.backends import (
    available_backends,
    get_default_backend,
    register_python_backend,
    set_default_backend,
)
from operator_runtime.errors import (
    AutogradError,
    InsufficientWorkspaceError,
    InvalidArgumentError,
    NotSupportedError,
    OperatorRuntimeError,
    RuntimeFailure,
    Status,
    UnsupportedDtypeError,
)
from operator_runtime.ops import *  # noqa: F401,F403  (the generated operator functions)
from operator_runtime import tilelang  # registers backend="tilelang"; imports no TileLang
from operator_runtime.cache import (
    clear_descriptor_cache,
    descriptor_cache_info,
    set_descriptor_cache_capacity,
)

__all__ = [
    *_ops.__all__,
    "available_backends",
    "get_default_backend",
    "register_python_backend",
    "set_default_backend",
    "tilelang",
    "descriptor_cache_info",
    "clear_descriptor_cache",
    "set_descriptor_cache_capacity",
    "AutogradError",
    "InsufficientWorkspaceError",
    "InvalidArgumentError",
    "NotSupportedError",
    "OperatorRuntimeError",
    "RuntimeFailure",
    "Status",
    "UnsupportedDtypeError",
]
