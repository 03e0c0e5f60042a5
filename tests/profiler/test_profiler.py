"""plugtorch.profiler against torch.profiler: the same events where the names map (torch's
``aten::linear`` is plugtorch's ``linear``), ranges nested the same, the same steps recorded."""
from __future__ import annotations

import gzip
import json
import os
import re
import warnings

import pytest

import plugtorch as pt
from plugtorch.core.optable import MODES
from plugtorch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

# torch's backward node of a Linear layer is addmm's; plugtorch's linear op keeps its own node
_NODE_NAMES = {"AddmmBackward0": "LinearBackward0"}


def _ours(name: str) -> str:
    """torch's event name as plugtorch names it."""
    name = name.removeprefix("aten::")
    for theirs, ours in _NODE_NAMES.items():
        name = name.replace(theirs, ours)
    return name


def _mlp_step(lib, record):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    x, y = lib.randn(3, 4), lib.randn(3, 2)
    with (lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU], record_shapes=True) as prof,
          lib.profiler.record_function("train_step")):
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    record(prof)
    return prof


def _counts(prof, ours=False):
    return {(e.key if ours else _ours(e.key)): e.count for e in prof.key_averages()}


def test_an_mlp_step_has_torchs_op_and_backward_counts(torch):
    theirs = _counts(_mlp_step(torch, lambda p: None))
    ours = _counts(_mlp_step(pt, lambda p: None), ours=True)
    same = ["train_step", "linear", "relu", "mse_loss", "threshold_backward", "ReluBackward0",
            "MseLossBackward0", "LinearBackward0", "torch::autograd::AccumulateGrad",
            "autograd::engine::evaluate_function: LinearBackward0",
            "autograd::engine::evaluate_function: ReluBackward0",
            "autograd::engine::evaluate_function: MseLossBackward0",
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "Optimizer.step#SGD.step"]
    assert {n: ours.get(n) for n in same} == {n: theirs.get(n) for n in same}
    assert MODES.on == 0


def test_shapes_are_recorded_as_torchs(torch):
    def shapes(prof, name):
        return [e.input_shapes for e in prof.events() if _ours(e.name) == name]
    theirs, ours = _mlp_step(torch, lambda p: None), _mlp_step(pt, lambda p: None)
    for name in ("linear", "relu"):
        assert shapes(ours, name) == shapes(theirs, name), name
    # torch passes threshold_backward's threshold as a third operand ([]); plugtorch as an attr
    assert shapes(ours, "threshold_backward") == [[[3, 8], [3, 8]]]
    assert shapes(theirs, "threshold_backward") == [[[3, 8], [3, 8], []]]
    assert shapes(ours, "linear") == [[[3, 4], [8, 4], [8]], [[3, 8], [2, 8], [2]]]


def test_backward_ranges_hold_the_ops_of_the_nodes_rule():
    prof = _mlp_step(pt, lambda p: None)
    (tb,) = [e for e in prof.events() if e.name == "threshold_backward"]
    assert tb.cpu_parent.name == "ReluBackward0"
    assert tb.cpu_parent.cpu_parent.name == "autograd::engine::evaluate_function: ReluBackward0"
    assert tb.cpu_parent.cpu_parent.cpu_parent.name == "train_step"


def test_a_decomposition_nests_its_ops_and_a_kernel_does_not():
    prof = _mlp_step(pt, lambda p: None)
    by_name = {e.name: e for e in prof.events()}
    mse = by_name["mse_loss"]  # no kernel on the NumPy backend: its decomposition ran, op by op
    assert mse.kernel is False and mse.backend == "numpy"
    assert mse.cpu_children and all(c.cpu_parent is mse for c in mse.cpu_children)
    assert by_name["relu"].kernel is True and by_name["relu"].cpu_children == []


def _range_tree(prof, keep):
    def tree(e):
        return (_ours(e.name), [tree(c) for c in e.cpu_children if _ours(c.name) in keep])
    return [tree(e) for e in prof.events() if e.cpu_parent is None and _ours(e.name) in keep]


def test_record_function_ranges_nest_as_torchs(torch):
    def run(lib):
        @lib.profiler.record_function("decorated")
        def f(a):
            return a.sin()

        x = lib.ones(3)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU]) as prof:
            with lib.profiler.record_function("outer"):
                a = x.exp()
                with lib.autograd.profiler.record_function("inner"):
                    a.neg()
                f(a)
            f(x)
        return prof
    keep = {"outer", "inner", "decorated", "exp", "neg", "sin"}
    ours = _range_tree(run(pt), keep)
    assert ours == _range_tree(run(torch), keep)
    assert ours[0] == ("outer", [("exp", []), ("inner", [("neg", [])]), ("decorated", [("sin", [])])])


def _scheduled(lib, **kw):
    traces = []

    def ready(prof):
        traces.append(sorted({e.name for e in prof.events() if e.name.startswith(("it", "ProfilerStep"))}))
    x = lib.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warmup=0's warning (asserted below), torch's about acc_events
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU], schedule=lib.profiler.schedule(**kw),
                                  on_trace_ready=ready) as prof:
            for i in range(12):
                with lib.profiler.record_function(f"it{i}"):
                    x.neg()
                prof.step()
    return traces


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2, repeat=2, skip_first=1),
                                dict(wait=2, warmup=0, active=1, repeat=0),
                                dict(wait=0, warmup=2, active=3, repeat=1, skip_first=3)])
def test_the_schedule_records_torchs_steps(torch, kw):
    ours = _scheduled(pt, **kw)
    assert ours == _scheduled(torch, **kw)
    assert ours and all("ProfilerStep*" in t for t in ours)


def test_schedule_checks_its_arguments_as_torch():
    with pytest.raises(AssertionError, match="active=0 \\(need > 0\\)"):
        schedule(wait=0, warmup=1, active=0)
    with pytest.warns(UserWarning, match="won't be using warmup"):
        schedule(wait=1, warmup=0, active=1)


def test_key_averages_self_time_within_total_and_the_table():
    prof = _mlp_step(pt, lambda p: None)
    avgs = prof.key_averages()
    assert all(0 <= a.self_cpu_time_total <= a.cpu_time_total + 1e-6 for a in avgs)
    for e in prof.events():
        assert e.self_cpu_time_total <= e.cpu_time_total + 1e-6
        assert all(e.start_us <= c.start_us and c.end_us <= e.end_us for c in e.cpu_children)
    total = avgs.total_average()
    assert total.key == "Total" and total.count == len(prof.events())
    table = avgs.table(sort_by="cpu_time_total", row_limit=-1)
    header = table.splitlines()[1]
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls",
                   "Input Shapes"):
        assert column in header
    rows = table.splitlines()[3:-2]
    assert rows[0].split()[0] == "train_step" and rows[0].split()[3] == "100.00%"  # the outermost range
    assert len(rows) == len(avgs)
    assert table.splitlines()[-1].startswith("Self CPU time total: ")
    assert len(avgs.table(row_limit=3).splitlines()) == 3 + 3 + 2
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert sum(a.count for a in by_shape if a.key == "linear") == 2 and len(by_shape) > len(avgs)


def test_the_table_without_shapes_has_torchs_columns(torch):
    def header(lib):
        x = lib.ones(2, 2)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU]) as prof:
            x.exp()
        return prof.key_averages().table().splitlines()[1].split("  ")
    assert [h.strip() for h in header(pt) if h.strip()] == [h.strip() for h in header(torch) if h.strip()]


def test_chrome_trace_is_valid_json_with_the_fields(tmp_path):
    prof = _mlp_step(pt, lambda p: None)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e in complete:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0 and e["pid"] == os.getpid()
    (lin, _) = [e for e in complete if e["name"] == "linear"]
    assert lin["cat"] == "cpu_op" and lin["args"]["Input Dims"] == [[3, 4], [8, 4], [8]]
    assert lin["args"]["backend"] == "numpy" and lin["args"]["kernel"] == "kernel"
    mse = next(e for e in complete if e["name"] == "mse_loss")
    assert mse["args"]["kernel"] == "decomposition"
    step = next(e for e in complete if e["name"] == "train_step")
    assert step["cat"] == "user_annotation"
    assert all(step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1e-3 for e in complete)


def test_tensorboard_trace_handler_writes_torchs_file_name(tmp_path):
    x = pt.ones(2)
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w0")) as prof:
        for _ in range(3):
            x.neg()
            prof.step()
    (name,) = os.listdir(tmp_path / "tb")
    assert re.fullmatch(r"w0\.\d+\.pt\.trace\.json", name)
    names = [e["name"] for e in json.loads((tmp_path / "tb" / name).read_text())["traceEvents"]]
    assert "ProfilerStep#1" in names and "neg" in names
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path / "gz"), use_gzip=True)):
        x.neg()
    (name,) = os.listdir(tmp_path / "gz")
    assert name.endswith(".pt.trace.json.gz")
    with gzip.open(tmp_path / "gz" / name, "rt") as f:
        assert [e["name"] for e in json.load(f)["traceEvents"] if e["ph"] == "X"] == ["neg"]


def test_no_mode_is_left_in_force_after_the_block_even_after_an_error():
    x = pt.ones(2)
    with pytest.raises(ValueError, match="boom"), profile() as prof, record_function("failing"):
        x.exp()
        raise ValueError("boom")
    assert MODES.on == 0
    assert [e.name for e in prof.events()] == ["failing", "exp"]
    with pytest.raises(RuntimeError), profile():
        pt.ones(2, 3) @ pt.ones(2, 3)  # the op's own error, raised inside the mode
    assert MODES.on == 0
    with profile(schedule=schedule(wait=1, warmup=1, active=1)) as prof:
        prof.step()
    assert MODES.on == 0


def test_record_function_outside_a_profile_records_nothing():
    with record_function("nowhere"):
        pt.ones(2).exp()
    with profile() as prof:
        pt.ones(2).neg()
    assert [e.name for e in prof.events()] == ["neg"]


def test_memory_and_stack():
    x = pt.ones(3, 8)
    with profile(profile_memory=True, with_stack=True) as prof:
        x.relu()
        x.reshape(8, 3)
    relu, reshape = prof.events()
    assert relu.self_cpu_memory_usage == 3 * 8 * 4 and relu.cpu_memory_usage == 96
    assert reshape.self_cpu_memory_usage == 0  # a view allocates nothing
    assert relu.stack and "test_profiler.py" in relu.stack[0] and "test_memory_and_stack" in relu.stack[0]
    table = prof.key_averages().table()
    assert "CPU Mem" in table and "Self CPU Mem" in table and "96 B" in table


def test_flops_of_a_matmul():
    with profile(with_flops=True) as prof:
        pt.ones(4, 5) @ pt.ones(5, 6)
    (mm,) = prof.events()
    assert mm.flops == 2 * 4 * 5 * 6
    assert "Total FLOPs" in prof.key_averages().table()


def test_cuda_activity_without_a_gpu_warns_as_torch_and_records_the_cpu():
    if pt.cuda.is_available():
        pytest.skip("a CUDA backend is available here: the warning is for machines without one")
    with (pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"),
          profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof):
        pt.ones(2).exp()
    assert [e.name for e in prof.events()] == ["exp"] and prof.events()[0].device_time_total == 0


def test_cuda_activity_times_device_kernels():
    if not pt.cuda.is_available():
        pytest.skip("no CUDA backend here (the CuPy backend and a GPU): device timing needs one")
    x = pt.ones(256, 256, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        x @ x
    (mm,) = prof.events()
    assert mm.backend != "numpy" and mm.device_time_total > 0
    assert "Self CUDA" in prof.key_averages().table()


class _FakeCudaEvents:
    """A CuPy-like ``cuda`` namespace whose events read the host clock: the device-timing path
    run on the NumPy backend, for machines without a GPU."""

    class Event:
        def record(self):
            import time
            self.t = time.perf_counter()

        def synchronize(self):
            pass

    @staticmethod
    def get_elapsed_time(start, end):
        return (end.t - start.t) * 1e3  # ms, as cupy.cuda.get_elapsed_time


def test_cuda_activity_times_each_kernel_between_two_events(monkeypatch):
    backend = pt.get_registry().backends["numpy"]
    fake = type("xp", (), {"cuda": _FakeCudaEvents})
    monkeypatch.setattr(backend, "accelerator", "cuda")
    monkeypatch.setattr(backend, "array_module", fake)
    x = pt.ones(64, 64)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof, record_function("r"):
        x @ x
    r, mm = prof.events()
    assert r.device_time_total == 0 and 0 < mm.device_time_total <= mm.cpu_time_total
    table = prof.key_averages().table()
    assert "Self CUDA" in table and "Self CUDA time total" in table
    monkeypatch.undo()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x @ x
    assert prof.events()[0].device_time_total == 0


def test_the_autograd_profiler_prints_its_events_in_order():
    x = pt.ones(2)
    with pt.autograd.profiler.profile(record_shapes=True) as prof, pt.profiler.record_function("r"):
        x.exp().neg()
    text = str(prof)
    rows = [line.split()[0] for line in text.splitlines()[3:-2]]
    assert rows == ["r", "exp", "neg"]
    assert prof.function_events[1].input_shapes == [[2]]
    span = prof.function_events[0].time_range
    assert span.elapsed_us() == pytest.approx(span.end - span.start) and span.start <= prof.function_events[1].start_us
    assert prof.self_cpu_time_total == pytest.approx(prof.total_average().self_cpu_time_total)
    with pytest.raises(RuntimeError, match="not reentrant"), prof:
        pass
    assert MODES.on == 0


def test_gradients_are_the_same_under_the_profiler():
    def grads():
        pt.manual_seed(0)
        w = pt.randn(3, 3, requires_grad=True)
        x = pt.randn(2, 3)
        y = (x @ w).tanh()
        (gw,) = pt.autograd.grad(y.sum() + (y * y).sum(), w, create_graph=True)  # y used twice: summed grads
        (ggw,) = pt.autograd.grad(gw.sum(), w)
        return gw.detach(), ggw
    plain = grads()
    with profile() as prof:
        profiled = grads()
    assert all(a.tolist() == b.tolist() for a, b in zip(plain, profiled))
    names = {e.name for e in prof.events()}
    assert {"autograd::engine::evaluate_function: TanhBackward0", "TanhBackward0", "matmul"} <= names
    assert MODES.on == 0


def test_a_multi_output_function_is_one_backward_range(torch):
    def names(lib):
        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, a, b):
                return a * 2 + b * 3
        x = lib.ones(3, requires_grad=True)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU]) as prof:
            a, b = Two.apply(x)
            (a.sum() + b.sum()).backward()
        return [e.name for e in prof.events() if "TwoBackward" in e.name], x.grad.tolist()
    assert names(pt) == names(torch) == (["autograd::engine::evaluate_function: TwoBackward", "TwoBackward"],
                                         [5.0, 5.0, 5.0])


def test_activities_are_checked_as_torchs():
    with pytest.raises(AssertionError, match="No valid profiler activities found"):
        profile(activities=[])
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profile(activities=["cpu"])
    with profile(activities=[{ProfilerActivity.CPU: []}]) as prof:  # torch's per-group form
        pt.ones(2).exp()
    assert [e.name for e in prof.events()] == ["exp"]
    with pytest.warns(FutureWarning, match="use_cuda"):
        assert ProfilerActivity.CUDA not in profile(use_cuda=False).activities
