"""Gradients through oprt's ops against torch's autograd: each of the five
differentiable ops in several layouts and dtypes, a small MLP's training step
(gradients and the updated weights), torch.compile of a forward and backward,
and the calls that have no gradient (backward ops, out= forms) raising.

Runs on the cpu backend everywhere and, where a CUDA device is present (the
GPU-runner bundle on the H200), on the nvidia backend too. torch's gradcheck
needs float64, which oprt does not take; the reference is torch's own autograd
on the same float32 (or half) values, at the case tables' tolerances.
"""

from __future__ import annotations

import sys

import pytest
import torch

import operator_runtime as ort

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TOLERANCE = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
}


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def _transposed(shape, device, dtype):
    return torch.randn(*reversed(shape), device=device, dtype=dtype).t()


def _layouts(shape, device, dtype):
    """The same logical shape contiguous, transposed (2-d) and as a strided slice."""
    yield torch.randn(*shape, device=device, dtype=dtype)
    yield _transposed(shape, device, dtype)
    yield torch.randn(shape[0], 2 * shape[1], device=device, dtype=dtype)[:, ::2]


# name -> (oprt function, torch function, input shapes)
CASES = {
    "copy": (ort.copy, lambda x: x.clone(), [(6, 10)]),
    "relu": (ort.relu, torch.relu, [(6, 10)]),
    "leaky_relu": (lambda x: ort.relu(x, 0.1),
                   lambda x: torch.nn.functional.leaky_relu(x, 0.1), [(6, 10)]),
    "reduce_sum_last": (lambda x: ort.reduce_sum(x, -1), lambda x: x.sum(-1), [(6, 10)]),
    "reduce_sum_first_keepdim": (lambda x: ort.reduce_sum(x, 0, keepdim=True),
                                 lambda x: x.sum(0, keepdim=True), [(6, 10)]),
    "softmax_last": (ort.softmax, lambda x: torch.softmax(x, -1), [(6, 10)]),
    "softmax_first": (lambda x: ort.softmax(x, 0), lambda x: torch.softmax(x, 0), [(6, 10)]),
    "vector_add": (ort.vector_add, torch.add, [(6, 10), (6, 10)]),
}


def _compare(ours, theirs, inputs, dtype):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    mirrors = [x.detach().clone().requires_grad_(True) for x in inputs]
    result, expected = ours(*leaves), theirs(*mirrors)
    assert result.requires_grad
    torch.testing.assert_close(result, expected, **TOLERANCE[dtype])
    grad = torch.randn_like(expected)
    result.backward(grad)
    expected.backward(grad)
    for leaf, mirror in zip(leaves, mirrors):
        torch.testing.assert_close(leaf.grad, mirror.grad, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", TOLERANCE, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_torch_in_every_layout(name, dtype, device):
    ours, theirs, shapes = CASES[name]
    layouts = [list(_layouts(shape, device, dtype)) for shape in shapes]
    for inputs in zip(*layouts):
        _compare(ours, theirs, inputs, dtype)


@pytest.mark.parametrize(
    "shapes", [((4, 1, 6), (5, 1)), ((7,), (3, 7)), ((3, 1), ()), ((2, 3), (2, 3))], ids=str
)
def test_vector_add_sums_its_gradient_over_broadcast_dimensions(shapes, device):
    inputs = [torch.randn(shape, device=device) for shape in shapes]
    _compare(ort.vector_add, torch.add, inputs, torch.float32)


def test_gradients_of_long_rows_and_empty_tensors(device):
    _compare(ort.softmax, lambda x: torch.softmax(x, -1), [torch.randn(3, 70000, device=device)],
             torch.float32)
    _compare(lambda x: ort.reduce_sum(x, 1), lambda x: x.sum(1),
             [torch.randn(4, 0, 5, device=device)], torch.float32)
    _compare(ort.relu, torch.relu, [torch.randn(0, 8, device=device)], torch.float32)


def test_only_inputs_that_need_it_get_a_gradient(device):
    a = torch.randn(4, 6, device=device, requires_grad=True)
    b = torch.randn(1, 6, device=device)
    ort.vector_add(a, b).sum().backward()
    assert b.grad is None
    torch.testing.assert_close(a.grad, torch.ones_like(a))


class Mlp(torch.nn.Module):
    """Two linear layers with leaky ReLU, a softmax over the classes, and a
    per-example sum that reduce_sum or torch computes."""

    def __init__(self, use_oprt: bool):
        super().__init__()
        self.first = torch.nn.Linear(32, 64)
        self.second = torch.nn.Linear(64, 10)
        self.use_oprt = use_oprt

    def forward(self, x):
        if self.use_oprt:
            hidden = ort.relu(ort.vector_add(self.first(x), torch.ones(64, device=x.device)), 0.01)
            probabilities = ort.softmax(self.second(hidden), -1)
            return ort.reduce_sum(probabilities * ort.copy(probabilities), -1)
        hidden = torch.nn.functional.leaky_relu(self.first(x) + 1, 0.01)
        probabilities = torch.softmax(self.second(hidden), -1)
        return (probabilities * probabilities.clone()).sum(-1)


def test_a_training_step_of_a_small_mlp_matches_torch(device):
    torch.manual_seed(0)
    ours = Mlp(use_oprt=True).to(device)
    theirs = Mlp(use_oprt=False).to(device)
    theirs.load_state_dict(ours.state_dict())
    x, target = torch.randn(16, 32, device=device), torch.rand(16, device=device)
    for model in (ours, theirs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
    for (name, mine), (_, reference) in zip(ours.named_parameters(), theirs.named_parameters()):
        torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-5, atol=1e-6, msg=name)
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6, msg=name)


def test_compiled_forward_and_backward_match_eager(device):
    def loss(x, w):
        return ort.reduce_sum(ort.softmax(ort.relu(ort.vector_add(x, w)), -1) * x, -1).sum()

    x = torch.randn(8, 40, device=device, requires_grad=True)
    w = torch.randn(40, device=device, requires_grad=True)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    compiled(x, w).backward()
    grads = x.grad.clone(), w.grad.clone()
    x.grad, w.grad = None, None
    loss(x, w).backward()
    torch.testing.assert_close(grads[0], x.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[1], w.grad, rtol=1e-5, atol=1e-5)


def _python_files_run_by(call) -> set[str]:
    seen = set()

    def profile(frame, event, _arg):
        if event == "call":
            seen.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def _runs_pythons_autograd_kernel(call) -> bool:
    # torch.library.register_autograd's kernel (torch/_library/autograd.py)
    return any(name.replace("\\", "/").endswith("_library/autograd.py")
               for name in _python_files_run_by(call))


@pytest.mark.parametrize("name", sorted(CASES))
def test_only_calls_that_need_a_gradient_run_the_python_autograd_kernel(name, device):
    # _C's C++ autograd kernel sends the others below autograd (it cost ~3.7 us a call).
    ours, _, shapes = CASES[name]
    inputs = [torch.randn(*shape, device=device) for shape in shapes]
    assert not _runs_pythons_autograd_kernel(lambda: ours(*inputs))
    with torch.no_grad():
        needing = [x.clone().requires_grad_(True) for x in inputs]
        assert not _runs_pythons_autograd_kernel(lambda: ours(*needing))
    assert _runs_pythons_autograd_kernel(lambda: ours(*needing).sum().backward())
    assert all(x.grad is not None for x in needing)


def test_backward_ops_have_no_gradient_of_their_own(device):
    x = torch.randn(4, 8, device=device, requires_grad=True)
    y = ort.softmax(x, -1)
    # A graph of the backward (for a second derivative) would need softmax_backward's.
    with pytest.raises(ort.AutogradError,
                       match="softmax_backward: y requires grad, but oprt has no backward"):
        torch.autograd.grad(y.sum(), x, create_graph=True)
    dy = torch.randn(4, 8, device=device, requires_grad=True)
    with pytest.raises(ort.AutogradError,
                       match="softmax_backward: dy requires grad, but oprt has no backward"):
        ort.softmax_backward(dy, y.detach())
    with pytest.raises(ort.AutogradError,
                       match="relu_backward: dy requires grad, but oprt has no backward"):
        ort.relu_backward(dy, x.detach())


def test_out_forms_raise_and_point_to_the_functional_op(device):
    x = torch.randn(4, 8, device=device, requires_grad=True)
    out = torch.empty(4, 8, device=device)
    message = ("softmax: input requires grad, but the out= form of softmax has no backward .* "
               r"call ort.softmax\(...\) for gradients")
    with pytest.raises(ort.AutogradError, match=message):
        ort.softmax_(out, x)
    with pytest.raises(ort.AutogradError, match=message):
        with ort.prepare_softmax(out, x.detach()) as prepared:
            prepared.run(x)
    with torch.no_grad():
        ort.softmax_(out, x)
    torch.testing.assert_close(out, torch.softmax(x.detach(), -1))


def test_forward_mode_tangents_raise_in_every_form(device):
    """No form has a forward-mode formula: a tangent is refused, never dropped."""
    import torch.autograd.forward_ad as forward_ad

    x, out = torch.randn(4, 8, device=device), torch.empty(4, 8, device=device)
    message = "softmax: input has a forward-mode AD tangent, but oprt has no forward-mode formula"
    with pytest.raises(ort.AutogradError, match=message):
        torch.func.jvp(ort.softmax, (x,), (torch.ones_like(x),))
    with pytest.raises(ort.AutogradError, match=message):
        torch.func.jacfwd(ort.softmax)(x[0])
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, torch.ones_like(x))
        with ort.prepare_softmax(out, x) as prepared:
            for call in (lambda: ort.softmax(dual), lambda: ort.softmax_(out, dual),
                         lambda: prepared.run(dual), lambda: ort.softmax(dual.requires_grad_())):
                with pytest.raises(ort.AutogradError, match=message):
                    call()
                with torch.no_grad(), pytest.raises(ort.AutogradError, match=message):
                    call()
        with pytest.raises(ort.AutogradError, match="vector_add: b has a forward-mode AD tangent"):
            ort.vector_add(x, forward_ad.make_dual(x, torch.ones_like(x)))
        # Tensors without a tangent run as usual inside a dual level.
        torch.testing.assert_close(ort.softmax(x), torch.softmax(x, -1))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
