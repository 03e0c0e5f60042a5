"""plugtorch.distributed in one process: the core's fallback group, torch-compatible API."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.distributed as dist


@pytest.fixture
def group(monkeypatch):
    # A plain pytest run is not under a launcher; make sure stray launcher variables
    # from the environment do not turn this into an MPI run.
    for var in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    dist.destroy_process_group()
    pg = dist.init()
    yield pg
    dist.destroy_process_group()


def test_not_initialized_until_init_and_rank_needs_it():
    dist.destroy_process_group()
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="init"):
        dist.get_rank()


def test_single_process_world(group):
    assert dist.is_initialized()
    assert dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "single"
    assert dist.init() is group  # idempotent
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group()


@pytest.mark.parametrize("op", [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT,
                                dist.ReduceOp.MIN, dist.ReduceOp.MAX])  # the float ones
def test_all_reduce_is_identity(group, op):
    t = plugtorch.tensor([1.5, -2.0, 3.0])
    assert dist.all_reduce(t, op=op) is None
    np.testing.assert_array_equal(t.numpy(), [1.5, -2.0, 3.0])


def test_async_work_and_barrier(group):
    t = plugtorch.arange(4.0)
    work = dist.broadcast(t, src=0, async_op=True)
    assert work.wait() and work.is_completed()
    dist.barrier()
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 3])


def test_all_gather_copies_into_the_one_slot(group):
    out = [plugtorch.zeros(3)]
    dist.all_gather(out, plugtorch.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out[0].numpy(), [1, 2, 3])


def test_objects(group):
    objs = [None]
    dist.all_gather_object(objs, {"a": 1})
    assert objs == [{"a": 1}]
    lst = ["x", 2]
    dist.broadcast_object_list(lst, src=0)
    assert lst == ["x", 2]


def test_argument_errors_name_the_problem(group):
    t = plugtorch.zeros(2)
    with pytest.raises(ValueError, match="src=1"):
        dist.broadcast(t, src=1)
    with pytest.raises(ValueError, match="one tensor per rank"):
        dist.all_gather([plugtorch.zeros(2), plugtorch.zeros(2)], t)
    with pytest.raises(ValueError, match=r"float32\[3\]"):
        dist.all_gather([plugtorch.zeros(3)], t)
    with pytest.raises(TypeError, match="AVG"):
        dist.all_reduce(plugtorch.tensor([1, 2]), op=dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match="ReduceOp"):
        dist.all_reduce(t, op="sum")
    with pytest.raises(TypeError, match="plugtorch.Tensor"):
        dist.all_reduce(np.zeros(2))


def test_unknown_backend_and_disagreeing_world():
    dist.destroy_process_group()
    with pytest.raises(ValueError, match="'mpi'"):
        dist.init_process_group("ucc")  # nccl is taken, as gloo, with a warning
    with pytest.raises(ValueError, match="rank 0 of 1"):
        dist.init_process_group(world_size=2)
    assert not dist.is_initialized()


def test_abort_in_one_process_is_system_exit(group):
    with pytest.raises(SystemExit) as info:
        dist.abort(3)
    assert info.value.code == 3
