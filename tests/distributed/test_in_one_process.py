"""The new distributed pieces in one process: futures, hooks, join, timeouts, threads,
the bfloat16 wire format and the stall report (no launcher needed)."""
from __future__ import annotations

import datetime
import types

import numpy as np
import pytest

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed import wire
from plugtorch.distributed.algorithms import Join
from plugtorch.distributed.algorithms.ddp_comm_hooks import default_hooks
from plugtorch.futures import Future, collect_all
from plugtorch.nn.parallel import DistributedDataParallel as DDP


@pytest.fixture
def group(monkeypatch):
    for var in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PLUGTORCH_DISTRIBUTED_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    dist.destroy_process_group()
    pg = dist.init()
    yield pg
    dist.destroy_process_group()


# -- futures ------------------------------------------------------------------------------

def test_future_then_runs_callbacks_in_order_once_the_value_is_set():
    fut = Future()
    seen = []
    fut.add_done_callback(lambda f: seen.append(("cb", f.value())))
    child = fut.then(lambda f: f.value() * 10)
    assert not fut.done() and not child.done()
    with pytest.raises(RuntimeError, match="not complete"):
        fut.value()
    fut.set_result(4)
    assert seen == [("cb", 4)] and child.done() and child.wait() == 40
    with pytest.raises(RuntimeError, match="only be marked completed once"):
        fut.set_result(5)
    assert collect_all([fut, child]).wait() == [fut, child]


def test_future_errors_reach_the_child_and_waiting_on_nothing_fails():
    fut = Future()
    child = fut.then(lambda f: f.value() + 1)
    fut.set_exception(ValueError("broken"))
    with pytest.raises(ValueError, match="broken"):
        child.wait()
    with pytest.raises(RuntimeError, match="nothing will complete"):
        Future().wait()


def test_work_future_holds_the_tensors(group):
    t = plugtorch.ones(3)
    fut = dist.all_reduce(t, async_op=True).get_future()
    assert fut.wait()[0] is t and fut.then(lambda f: f.value()[0].sum().item()).wait() == 3.0


# -- hooks with one process: the single group's reductions -----------------------------------

def bucket_of(values):
    flat = plugtorch.tensor(values)
    return dist.GradBucket(0, flat, [flat], [flat], True)


def test_default_hooks_in_one_process(group):
    values = [1.0, 1.0 + 2.0**-9, 3.14159, -1e-3]
    assert default_hooks.allreduce_hook(None, bucket_of(values)).wait().tolist() == pytest.approx(values)
    fp16 = default_hooks.fp16_compress_hook(group, bucket_of(values)).wait()
    assert fp16.dtype is plugtorch.float32
    np.testing.assert_array_equal(fp16.numpy(), np.float32(values).astype(np.float16).astype(np.float32))
    bf16 = default_hooks.bf16_compress_hook(None, bucket_of(values)).wait()
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(bf16.numpy(), torch.tensor(values).bfloat16().float().numpy())


@pytest.mark.parametrize("chunk", [wire.CHUNK, 1000], ids=["one-chunk", "many-chunks"])
@pytest.mark.parametrize("wire_dtype", wire.WIRE_DTYPES)
def test_wire_formats_round_and_sum_like_torch(torch, wire_dtype, chunk, monkeypatch):
    monkeypatch.setattr(wire, "CHUNK", chunk)  # 15,010 values: 16 chunks, the last one short
    g = np.random.default_rng(0)
    x = np.concatenate([(g.standard_normal(5000) * 1e3).astype(np.float32),
                        (g.standard_normal(5000) * 1e-6).astype(np.float32),  # float16 subnormals
                        g.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.float32([np.inf, -np.inf, np.nan, 3.4e38, 0.0, -0.0, 65520, 65519.99, 2.98e-8, 2.99e-8])])
    tdtype = getattr(torch, wire_dtype)
    encode, decode = wire.CODECS[wire_dtype]
    with np.errstate(over="ignore", invalid="ignore"):
        want = torch.from_numpy(x).to(tdtype).float().numpy()
    np.testing.assert_array_equal(decode(encode(x)), want)
    finite = x[np.isfinite(x) & (np.abs(x) < 6e4)]
    a, b = encode(finite), encode(finite[::-1].copy())
    wire.add_into(wire_dtype, a, b)
    summed = torch.from_numpy(finite).to(tdtype) + torch.from_numpy(finite[::-1].copy()).to(tdtype)
    np.testing.assert_array_equal(decode(b), summed.float().numpy())
    grid = x[:6000].reshape(2, 3000)  # the codecs keep the shape they are given
    assert encode(grid).shape == grid.shape and decode(encode(grid)).shape == grid.shape


def test_wire_dtype_arguments_are_checked():
    with pytest.raises(TypeError, match="float32 tensors with SUM or AVG"):
        wire.check("bfloat16", plugtorch.int64, "SUM")
    with pytest.raises(ValueError, match="unknown wire_dtype"):
        wire.check("fp8", plugtorch.float32, "SUM")


def test_register_comm_hook_checks_its_argument(group):
    ddp = DDP(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="callable"):
        ddp.register_comm_hook(None, "fp16")
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    with pytest.raises(RuntimeError, match="only be called once"):
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)


def test_join_in_one_process_is_plain_training(group):
    model = nn.Linear(3, 1)
    ddp = DDP(model)
    with ddp.join() as join:
        assert isinstance(join, Join) and ddp._join_config.enable
        ddp(plugtorch.ones(2, 3)).sum().backward()
    assert not ddp._join_config.enable, "outside the block DDP runs unshadowed"
    assert model.weight.grad.tolist() == [[2.0, 2.0, 2.0]]
    with pytest.raises(ValueError, match="at least one joinable"):
        Join([])


# -- timeouts, threads --------------------------------------------------------------------

def test_timeout_from_argument_environment_or_default(monkeypatch):
    seconds = dist._timeout_seconds
    monkeypatch.delenv("PLUGTORCH_DISTRIBUTED_TIMEOUT", raising=False)
    assert seconds(None) == 600 and seconds(datetime.timedelta(seconds=90)) == 90 and seconds(2.5) == 2.5
    monkeypatch.setenv("PLUGTORCH_DISTRIBUTED_TIMEOUT", "30")
    assert seconds(None) == 30
    monkeypatch.setenv("PLUGTORCH_DISTRIBUTED_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="PLUGTORCH_DISTRIBUTED_TIMEOUT='soon'"):
        seconds(None)
    with pytest.raises(ValueError, match="positive"):
        seconds(0)


def test_set_num_threads_resizes_the_blas_pool_and_marks_the_choice():
    from plugtorch import threads
    before, chosen = plugtorch.get_num_threads(), threads._chosen_by_user
    try:
        plugtorch.set_num_threads(1)
        assert plugtorch.get_num_threads() == 1
        assert threads.user_choice() == "plugtorch.set_num_threads() was called"
        assert threads.size_for_ranks(sharing=4, cores=8) is None  # the user's choice stands
        with pytest.raises(ValueError, match="positive integer"):
            plugtorch.set_num_threads(0)
    finally:
        plugtorch.set_num_threads(before)
        threads._chosen_by_user = chosen


def test_threads_are_sized_to_a_share_of_the_cores(monkeypatch):
    from plugtorch import threads
    for var in threads.THREAD_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(threads, "_chosen_by_user", False)
    before = plugtorch.get_num_threads()
    try:
        assert threads.size_for_ranks(sharing=3, cores=2) == 1
        assert threads.size_for_ranks(sharing=2, cores=9) == 4
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert threads.size_for_ranks(sharing=2, cores=2) is None
        assert threads.user_choice() == "OMP_NUM_THREADS=2 is set"
    finally:
        threads._controller().limit(limits=before)


# -- the stall report ---------------------------------------------------------------------

def test_stall_report_names_the_collective_and_who_did_not_arrive():
    stall = pytest.importorskip("plugtorch_backends.mpi.stall")
    work = types.SimpleNamespace(seq=12, what="all_reduce(SUM, float32[10])")
    replies = {
        0: {"rank": 0, "posted": 12, "last": "#12 all_reduce(SUM, float32[10])", "open": [(12, work.what)]},
        1: {"rank": 1, "posted": 11, "last": "#11 barrier()", "open": []},
        3: {"rank": 3, "posted": 12, "last": "#12 broadcast(float32[10], src=0)",
            "open": [(12, "broadcast(float32[10], src=0)")]},
    }
    text = stall.diagnosis(work, rank=0, size=4, timeout=5, replies=replies, grace=2)
    assert text.startswith("plugtorch.distributed: collective #12 all_reduce(SUM, float32[10]) did not complete "
                           "within 5 s on rank 0 of 4. Ranks that did not arrive: [1, 2]; ranks waiting in it: "
                           "[0, 3].")
    assert "rank 1 did not arrive: it has posted 11 collectives (the last #11 barrier())" in text
    assert "rank 2 did not answer within 2 s" in text
    assert "rank 3 is in #12 broadcast(float32[10], src=0), a different collective" in text
