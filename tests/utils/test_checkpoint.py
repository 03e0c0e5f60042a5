"""utils.checkpoint: recomputation gives the un-checkpointed gradients bitwise (dropout included),
frees the activations, and follows torch's API (warnings, errors, reentrant vs not)."""
from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

import plugtorch
from plugtorch import nn
from plugtorch.utils.checkpoint import checkpoint, checkpoint_sequential


def copy_weights(ours, theirs):
    state = {k: plugtorch.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)


def _model(width=8, depth=3, p=0.5):
    plugtorch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU(), nn.Dropout(p)]
    return nn.Sequential(*layers)


def _grads(model, x, run):
    """Output, parameter and input gradients of run(model, x), from the same RNG state."""
    for p in model.parameters():
        p.grad = None
    x.grad = None
    plugtorch.manual_seed(7)
    y = run(model, x)
    (y * y).sum().backward()
    after = plugtorch.rand(3)  # the stream goes on as if nothing had been recomputed
    return [y.detach().numpy(), x.grad.numpy(), after.numpy()] + [p.grad.numpy() for p in model.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradients_equal_plain_ones_bitwise_with_dropout(use_reentrant):
    model = _model()
    x = plugtorch.randn(5, 8, requires_grad=True)
    plain = _grads(model, x, lambda m, v: m(v))
    runs = [lambda m, v: checkpoint(m, v, use_reentrant=use_reentrant),
            lambda m, v: checkpoint_sequential(m, 3, v, use_reentrant=use_reentrant),
            lambda m, v: checkpoint_sequential(list(m), 2, v, use_reentrant=use_reentrant)]
    for run in runs:
        for a, b in zip(plain, _grads(model, x, run)):
            np.testing.assert_array_equal(a, b)


def test_without_preserved_rng_state_dropout_masks_differ():
    model = _model(p=0.5)
    x = plugtorch.randn(5, 8, requires_grad=True)
    plain = _grads(model, x, lambda m, v: m(v))
    other = _grads(model, x, lambda m, v: checkpoint(m, v, use_reentrant=False, preserve_rng_state=False))
    assert not np.array_equal(plain[1], other[1])


def test_matches_torch_checkpoint_sequential(torch):
    ours = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 6), torch.nn.Tanh(),
                                 torch.nn.Linear(6, 2))
    copy_weights(ours, theirs)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    xp, xt = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yp = checkpoint_sequential(ours, 2, xp, use_reentrant=False)
    yt = torch.utils.checkpoint.checkpoint_sequential(theirs, 2, xt, use_reentrant=False)
    yp.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    np.testing.assert_allclose(yp.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


def test_use_reentrant_must_be_passed_explicitly_warning():
    lin = nn.Linear(2, 2)
    x = plugtorch.randn(1, 2, requires_grad=True)
    with pytest.warns(UserWarning, match=r"^torch.utils.checkpoint: the use_reentrant parameter should be passed "
                                         r"explicitly. Starting in PyTorch 2.9"):
        checkpoint(lin, x)
    with pytest.warns(UserWarning, match=r"^torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                                         r"parameter should be passed explicitly. In version 2.9"):
        checkpoint_sequential([lin, lin], 2, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(lin, x, use_reentrant=False)


def test_non_reentrant_keyword_arguments_tuples_and_parameters_without_input_grad():
    lin = nn.Linear(3, 3)
    x = plugtorch.randn(2, 3)  # requires no grad: the parameters still get theirs

    def fn(a, scale=1.0):
        y = lin(a) * scale
        return y, y.sum()

    y, s = checkpoint(fn, x, use_reentrant=False, scale=2.0)
    assert y.requires_grad and s.requires_grad
    (y.sum() + s).backward()
    expected = (2.0 * 2 * x.sum(0)).numpy()  # d/dW of 2*sum(lin(x)) twice over
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.tile(expected, (3, 1)), rtol=1e-6)


def test_reentrant_without_input_grad_warns_and_gives_no_gradients(torch):
    lin, tlin = nn.Linear(3, 3), torch.nn.Linear(3, 3)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True. Gradients will be None"):
        y = checkpoint(lin, plugtorch.randn(2, 3), use_reentrant=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        yt = torch.utils.checkpoint.checkpoint(tlin, torch.randn(2, 3), use_reentrant=True)
    assert y.requires_grad == yt.requires_grad is False


def test_errors_are_torchs():
    lin = nn.Linear(2, 2)
    x = plugtorch.randn(1, 2, requires_grad=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lin, x, use_reentrant=True, scale=1)
    with pytest.raises(ValueError, match="Passing `context_fn` or `debug` is only supported when use_reentrant=False"):
        checkpoint(lin, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
        checkpoint_sequential([lin], 1, x, use_reentrant=False, foo=1)
    y = checkpoint(lin, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match=r"checkpoint: double backward \(create_graph=True\)"):
        plugtorch.autograd.grad(y.sum(), x, create_graph=True)
    calls = []

    def grows(a):
        calls.append(1)
        return a.repeat(len(calls), 1)

    y = checkpoint(grows, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match="Recomputed values for the following tensors have different metadata"):
        y.sum().backward()


def _held_after_forward(model, x, segments):
    """NumPy bytes the graph holds once forward is done (NumPy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        y = checkpoint_sequential(model, segments, x, use_reentrant=False) if segments else model(x)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    y.sum().backward()
    return held, peak


def test_checkpoint_sequential_frees_the_activations():
    layers: list[nn.Module] = []
    for _ in range(16):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers)
    x = plugtorch.randn(1024, 256, requires_grad=True)  # 1 MiB per activation
    held, peak = _held_after_forward(model, x, 0)
    held_ck, peak_ck = _held_after_forward(model, x, 4)
    assert held > 12 * 2**20  # about one activation per layer
    assert held_ck < 0.6 * held and peak_ck < 0.6 * peak


def test_signatures_are_torchs(torch):
    import inspect

    import plugtorch.utils.checkpoint as ours

    for name in ("checkpoint", "checkpoint_sequential"):
        a = inspect.signature(getattr(ours, name)).parameters
        b = inspect.signature(getattr(torch.utils.checkpoint, name)).parameters
        assert list(a) == list(b), name
        assert [p.default for p in a.values() if p.name != "context_fn"] == \
            [p.default for p in b.values() if p.name != "context_fn"], name
