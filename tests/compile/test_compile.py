"""plugtorch.compile: captured and replayed steps compute exactly what eager ones do, re-capture
when a guard changes, and fall back to eager (warning once, or raising with fullgraph=True)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn
from plugtorch.apps.train import CNN, MLP
from plugtorch.compiler import CaptureError


class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn, self.fc2 = nn.Linear(20, 16), nn.BatchNorm1d(16), nn.Linear(16, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


MODELS = {"mlp": (MLP, (16, 784)), "cnn": (CNN, (4, 1, 28, 28)), "batchnorm": (BNNet, (16, 20))}


def train(model_name, compiled, steps, optimizer="adam", schedule=False, batches=None):
    """Parameters, buffers, gradients and losses after ``steps`` steps (dropout on, fixed seed)."""
    cls, shape = MODELS[model_name]
    plugtorch.manual_seed(0)
    model = cls()
    if optimizer == "adam":
        opt = plugtorch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    else:
        opt = plugtorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = plugtorch.optim.lr_scheduler.StepLR(opt, 2, 0.5) if schedule else None
    rng = np.random.default_rng(1)
    sizes = batches or [shape[0]] * steps

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = plugtorch.compile(step, fullgraph=True) if compiled else step
    losses = []
    for n in sizes:
        x = plugtorch.from_numpy(rng.standard_normal((n,) + shape[1:]).astype(np.float32))
        y = plugtorch.from_numpy(rng.integers(0, 10, n))
        losses.append(float(run(x, y).detach().numpy()))
        if sched is not None:
            sched.step()
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    return losses, state, grads, run


@pytest.mark.parametrize("model_name, optimizer, schedule, steps", [
    ("mlp", "adam", False, 50), ("mlp", "sgd", True, 50), ("cnn", "adam", True, 50), ("batchnorm", "sgd", False, 50),
])
def test_compiled_training_equals_eager_bitwise(model_name, optimizer, schedule, steps):
    eager = train(model_name, False, steps, optimizer, schedule)
    compiled = train(model_name, True, steps, optimizer, schedule)
    run = compiled[3]
    assert run.captures == 1 and run.replays == steps - 2  # one warm-up, one capture
    assert eager[0] == compiled[0]
    for k in eager[1]:
        np.testing.assert_array_equal(eager[1][k], compiled[1][k], err_msg=k)  # weights and BN buffers
    for a, b in zip(eager[2], compiled[2]):
        np.testing.assert_array_equal(a, b)  # p.grad is written back after each replay


def test_the_last_partial_batch_is_a_new_guard():
    sizes = [16] * 5 + [7] + [16] * 5 + [7, 7]
    eager = train("mlp", False, 0, batches=sizes)
    compiled = train("mlp", True, 0, batches=sizes)
    assert eager[0] == compiled[0]
    assert compiled[3].captures == 2  # 16 (warm-up, capture), 7 (warm-up, capture)


def test_dropout_draws_fresh_values_and_follows_manual_seed():
    plugtorch.manual_seed(0)
    drop = nn.Dropout(0.5)
    run = plugtorch.compile(lambda x: drop(x) * 1.0, fullgraph=True)
    x = plugtorch.ones(1000)
    outs = [run(x).numpy() for _ in range(4)]
    assert run.replays == 2
    assert not np.array_equal(outs[2], outs[3])  # each replay draws anew
    plugtorch.manual_seed(5)
    replayed = run(x).numpy()
    plugtorch.manual_seed(5)
    np.testing.assert_array_equal(replayed, drop(x).numpy())  # from the reseeded stream


def test_compiled_module_for_inference():
    plugtorch.manual_seed(0)
    model = CNN().eval()
    fast = plugtorch.compile(model, fullgraph=True)
    with plugtorch.no_grad():
        for _ in range(4):
            x = plugtorch.randn(3, 1, 28, 28)
            np.testing.assert_array_equal(fast(x).numpy(), model(x).numpy())
    assert fast.captures == 1 and fast.replays == 2
    assert fast.fc1 is model.fc1  # still answers as the module


def test_replaced_parameters_and_a_changed_parameter_set_recapture():
    model = nn.Linear(4, 3)
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    run = plugtorch.compile(step, fullgraph=True)
    x = plugtorch.ones(2, 4)
    for _ in range(3):
        run(x)
    assert run.captures == 1 and run.replays == 1
    with plugtorch.no_grad():
        model.weight.data = plugtorch.zeros(3, 4)  # a new array: the captured one is stale
    run(x)
    assert run.captures == 2
    np.testing.assert_allclose(model.weight.detach().numpy(), -0.2 * np.ones((3, 4)))
    extra = nn.Parameter(plugtorch.ones(2))
    opt.add_param_group({"params": [extra]})
    run(x)
    assert run.captures == 3


def _warns(run, match, *args):
    with pytest.warns(UserWarning, match=match):
        run(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per reason
        run(*args)


def test_host_reads_fall_back_with_a_warning_and_fullgraph_raises():
    def step(x):
        y = x * 2
        if y.sum().item() > 0:  # data-dependent control flow
            y = y + 1
        return y
    run = plugtorch.compile(step)
    x = plugtorch.ones(3)
    run(x)  # warm-up
    _warns(run, "reads tensor values on the host", x)
    np.testing.assert_array_equal(run(x).numpy(), [3.0, 3.0, 3.0])
    strict = plugtorch.compile(step, fullgraph=True)
    strict(x)
    with pytest.raises(CaptureError, match="fullgraph=True.*reads tensor values on the host"):
        strict(x)


def test_optimizers_without_refreshable_updates_fall_back():
    model = nn.Linear(3, 1)
    opt = plugtorch.optim.RMSprop(model.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    run = plugtorch.compile(step)
    x = plugtorch.ones(2, 3)
    run(x)
    _warns(run, "RMSprop.step computes its update from Python state", x)


def test_an_unconsumed_autograd_graph_falls_back():
    model = nn.Linear(3, 1)
    run = plugtorch.compile(model)
    x = plugtorch.ones(2, 3)
    run(x)
    with pytest.warns(UserWarning, match="autograd graph that no backward"):
        out = run(x)
    out.sum().backward()  # eager result: its graph works
    assert model.weight.grad is not None


class Options:
    __hash__ = None  # type: ignore[assignment]  # unhashable, as a dataclass with eq=True is

    def __init__(self, scale):
        self.scale = scale


def test_unhashable_arguments_fall_back():
    run = plugtorch.compile(lambda x, opts: x * opts.scale)
    with pytest.warns(UserWarning, match="cannot be guarded"):
        assert run(plugtorch.ones(2), Options(2.0)).tolist() == [2.0, 2.0]
    assert run(plugtorch.ones(2), Options(3.0)).tolist() == [3.0, 3.0]


def test_compile_is_torch_compatible_in_form():
    @plugtorch.compile(fullgraph=True)
    def f(x):
        return x + 1
    assert f(plugtorch.ones(1)).tolist() == [2.0]
    assert plugtorch.compile(f, disable=True) is f
    with pytest.raises(TypeError, match="expects a function or an nn.Module"):
        plugtorch.compile(3)


def test_train_with_compile_gives_the_eager_run(data_root, tmp_path):
    from plugtorch.apps.train import TrainConfig, train
    runs = []
    for compiled in (False, True):
        metrics = train(TrainConfig(data_dir=str(data_root), model="mlp", epochs=2, limit_train=1000,
                                    limit_test=500, quiet=True, compile=compiled))
        runs.append([(h["train_loss"], h["test_loss"], h["test_accuracy"]) for h in metrics["history"]])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("zero_outside", ["none", "zeros", "never"])
def test_gradients_zeroed_outside_the_compiled_function(zero_outside):
    """zero_grad() between calls (to None, or in place) or accumulation: as eager, every call."""
    def run(compiled):
        plugtorch.manual_seed(0)
        model = nn.Linear(5, 2)
        opt = plugtorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)

        def forward_backward(x):
            model(x).pow(2).sum().backward()
        fb = plugtorch.compile(forward_backward, fullgraph=True) if compiled else forward_backward
        for i in range(6):
            if zero_outside != "never":
                opt.zero_grad(set_to_none=zero_outside == "none")
            fb(plugtorch.full((3, 5), float(i)))
            opt.step()
        return model.weight.detach().numpy().copy(), model.weight.grad.numpy().copy(), fb
    (w1, g1, _), (w2, g2, fb) = run(False), run(True)
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(g1, g2)
    assert fb.replays >= 3


@pytest.mark.parametrize("zero", ["inside", "never"])
def test_a_kept_gradient_tensor_keeps_its_values(zero):
    """Each backward gives .grad a new tensor in eager mode; a replay must not write the next
    step's gradient into the tensor a caller kept from the last one."""
    def run(compiled):
        plugtorch.manual_seed(0)
        model = nn.Linear(4, 3)
        opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            if zero == "inside":
                opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
        fn = plugtorch.compile(step, fullgraph=True) if compiled else step
        kept = []
        for i in range(6):
            fn(plugtorch.full((2, 4), float(i + 1)))
            kept.append((model.weight.grad, model.weight.grad.numpy().copy()))
        return kept, fn
    (eager, _), (compiled, fn) = run(False), run(True)
    assert fn.replays >= 3
    for kept in (eager, compiled):
        assert len({id(t) for t, _ in kept}) == len(kept), "a new .grad tensor each step"
        for t, values in kept:
            np.testing.assert_array_equal(t.numpy(), values)
    for (a, _), (b, _) in zip(eager, compiled):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_compiled_function_called_while_another_captures_is_recorded_by_it():
    inner = plugtorch.compile(lambda x: x * 2, fullgraph=True)
    outer = plugtorch.compile(lambda x: inner(x) + 1, fullgraph=True)
    x = plugtorch.ones(2)
    for _ in range(3):
        inner(x)  # inner has its own trace now
    results = [outer(plugtorch.full((2,), float(i))).tolist() for i in range(4)]
    assert results == [[1.0, 1.0], [3.0, 3.0], [5.0, 5.0], [7.0, 7.0]]
    assert outer.replays == 2


def test_python_state_changes_inside_the_function_fall_back():
    model = nn.Linear(3, 1)
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)
    sched = plugtorch.optim.lr_scheduler.StepLR(opt, 1, 0.5)

    def step_and_schedule(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        sched.step()
    run = plugtorch.compile(step_and_schedule)
    run(plugtorch.ones(2, 3))
    _warns(run, "StepLR.step\\(\\) changes the learning rate in Python", plugtorch.ones(2, 3))

    def reseeded(x):
        plugtorch.manual_seed(3)
        return F.dropout(x, 0.5)
    run = plugtorch.compile(reseeded)
    run(plugtorch.ones(8))
    _warns(run, "reseeds a random generator", plugtorch.ones(8))
    eager_again = run(plugtorch.ones(8)).numpy()  # eager: reseeded inside, so the same draw
    plugtorch.manual_seed(3)
    np.testing.assert_array_equal(eager_again, F.dropout(plugtorch.ones(8), 0.5).numpy())


def test_a_replay_frees_each_temporary_after_its_last_use():
    """A replay holds a result only while a later call still reads it, as eager does: a chain
    of ten elementwise ops on a 4 MB tensor peaks at a few tensors' worth, not ten."""
    import tracemalloc

    def chain(x):
        for _ in range(10):
            x = x * 1.5 + 1.0
        return x

    x = plugtorch.randn(1 << 20)
    fn = plugtorch.compile(chain, fullgraph=True)
    expected = chain(x)
    fn(x), fn(x)
    assert fn.captures == 1
    tracemalloc.start()
    try:
        out = fn(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fn.replays == 1
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    assert peak < 4 * x.numel() * 4, f"a replay of 20 ops peaked at {peak / 2**20:.1f} MiB"


def test_layout_reads_are_not_replayed_calls():
    """matmul's rule chooses the gradient's layout of ``w.t()`` from strides (metadata): the
    trace replays the kernels, not those reads."""
    w = plugtorch.randn(4, 8, requires_grad=True)

    def step(x):
        w.grad = None
        (x @ w.t()).sum().backward()

    fn = plugtorch.compile(step, fullgraph=True)
    x = plugtorch.randn(5, 8)
    fn(x), fn(x)
    trace = fn.traces()[0]
    assert "strides" not in trace.names and trace.names.count("matmul") == 2


def test_a_capture_leaves_unused_backends_unprobed():
    """Capturing wraps the dispatch tables of the backends in use; it does not ask a backend
    nobody has used whether it is available (for CuPy that would import CuPy and ask the driver)."""
    import subprocess
    import sys
    code = ("import plugtorch\n"
            "f = plugtorch.compile(lambda x: x * 2 + 1, fullgraph=True)\n"
            "x = plugtorch.randn(3)\n"
            "f(x), f(x), f(x)\n"
            "assert f.captures == 1 and f.replays == 1\n"
            "b = plugtorch.get_registry().backends['cupy']\n"
            "print(b.probed)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
