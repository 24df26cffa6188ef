"""The pytest plugin behind the harness: ``--op``/``--backend`` options, the
parametrisation of the harness tests from ``ops/<op>/cases.py``, and the
fixtures naming the backend and device under test.

Load it with ``-p operator_runtime_testing.plugin`` (op_test_main.py does).
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import pytest
import torch

import operator_runtime as ort
from operator_runtime.backends import NATIVE_BACKEND_CODES

# Tests that only mean something on a GPU backend (streams, graphs, > 2^31 elements).
GPU_ONLY = "gpu_only"
# Tests of the C runtime's descriptors (_C.Descriptor made directly), which a
# Python backend (tilelang) does not have: they are deselected for it.
NATIVE_ONLY = "native_only"


def pytest_addoption(parser):
    group = parser.getgroup("operator_runtime")
    group.addoption("--op", required=True, help="operator whose ops/<op>/cases.py to run")
    group.addoption("--backend", default="cpu", help="cpu, nvidia, metax or tilelang")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{GPU_ONLY}: runs only for GPU backends")
    config.addinivalue_line("markers", f"{NATIVE_ONLY}: runs only for backends of the C runtime")


@functools.lru_cache(maxsize=None)
def case_tables(op: str) -> ModuleType:
    """ops.<op>.cases, with its case lists checked for unique names once."""
    module = importlib.import_module(f"ops.{op}.cases")
    for table in ("correctness_cases", "api_error_cases", "benchmark_cases"):
        names = [case.name for case in getattr(module, table)()]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"ops/{op}/cases.py: {table} repeats names {duplicates}")
    return module


@functools.lru_cache(maxsize=None)
def _cases(op: str, table: str) -> tuple:
    return tuple(getattr(case_tables(op), table)())


def pytest_generate_tests(metafunc):
    op = metafunc.config.getoption("op")
    for argument, table in (
        ("correctness_case", "correctness_cases"),
        ("api_error_case", "api_error_cases"),
    ):
        if argument in metafunc.fixturenames:
            cases = _cases(op, table)
            metafunc.parametrize(argument, cases, ids=[case.name for case in cases])


def device_of(backend: str) -> torch.device:
    return torch.device("cpu" if backend == "cpu" else "cuda")


def pytest_collection_modifyitems(config, items):
    backend = config.getoption("backend")
    markers = []
    if device_of(backend).type == "cpu":
        markers.append(GPU_ONLY)
    if backend not in NATIVE_BACKEND_CODES:
        markers.append(NATIVE_ONLY)
    deselected = [item for item in items if any(item.get_closest_marker(m) for m in markers)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]


@pytest.fixture(scope="session")
def op_spec(pytestconfig):
    return case_tables(pytestconfig.getoption("op")).OP


@pytest.fixture(scope="session")
def op_cases(pytestconfig) -> ModuleType:
    return case_tables(pytestconfig.getoption("op"))


@pytest.fixture(scope="session")
def backend(pytestconfig) -> str:
    name = pytestconfig.getoption("backend")
    if name not in ort.available_backends():
        pytest.fail(
            f"backend {name!r} cannot run on this machine (available: "
            f"{', '.join(ort.available_backends())}); a GPU backend needs its device",
            pytrace=False,
        )
    return name


@pytest.fixture(scope="session")
def device(backend) -> torch.device:
    return device_of(backend)
