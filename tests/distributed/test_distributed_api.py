"""plugtorch.distributed's names and signatures against torch.distributed, and what runs
without a launcher (one process)."""
from __future__ import annotations

import inspect

import pytest

import plugtorch
import plugtorch.distributed as dist

torch_dist = pytest.importorskip("torch.distributed")

FUNCTIONS = ["send", "recv", "isend", "irecv", "batch_isend_irecv", "reduce", "reduce_scatter",
             "reduce_scatter_tensor", "all_gather_into_tensor", "all_to_all", "all_to_all_single", "gather",
             "scatter", "gather_object", "scatter_object_list", "all_gather_object", "broadcast_object_list",
             "monitored_barrier", "new_group", "new_subgroups", "get_process_group_ranks", "get_global_rank",
             "get_group_rank", "get_node_local_rank", "is_torchelastic_launched", "broadcast", "all_reduce",
             "all_gather", "barrier", "get_rank", "get_world_size", "P2POp"]


def _params(fn):
    return [(p.name, p.default if p.default is not p.empty else "<required>")
            for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signature_is_torchs(name):
    mine, theirs = _params(getattr(dist, name)), _params(getattr(torch_dist, name))
    # torch's ReduceOp default is its own enum: compare by name
    norm = [(n, getattr(d, "name", d)) for n, d in theirs]
    assert [(n, getattr(d, "name", d)) for n, d in mine] == norm


def test_namespace_exports_torch_names_only():
    for leaked in ("os", "sys", "datetime", "annotations", "threads", "Tensor"):
        assert not hasattr(dist, leaked), leaked
    assert set(dist.__all__) <= set(dir(dist))
    assert [op.name for op in dist.ReduceOp] == list(torch_dist.ReduceOp.RedOpType.__members__)
    assert dist.GroupMember.NON_GROUP_MEMBER == torch_dist.GroupMember.NON_GROUP_MEMBER


@pytest.fixture
def one(monkeypatch):
    for var in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    dist.destroy_process_group()
    yield dist.init()
    dist.destroy_process_group()


def test_one_process_runs_every_op(one):
    t = plugtorch.arange(4.0)
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    out = plugtorch.zeros(4)
    dist.reduce_scatter(out, [t])
    dist.reduce_scatter_tensor(out, t * 2)
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    dist.all_gather_into_tensor(out, t)
    lst = [plugtorch.zeros(4)]
    dist.all_to_all(lst, [t + 1])
    dist.all_to_all_single(out, t + 2)
    assert lst[0].tolist() == [1.0, 2.0, 3.0, 4.0] and out.tolist() == [2.0, 3.0, 4.0, 5.0]
    dist.gather(t, lst, dst=0)
    dist.scatter(out, [t * 3], src=0)
    assert lst[0].tolist() == t.tolist() and out.tolist() == [0.0, 3.0, 6.0, 9.0]
    objs = [None]
    dist.gather_object("a", objs, dst=0)
    dist.scatter_object_list(lst, ["b"], src=0)
    assert objs == ["a"] and lst[0] == "b"
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
    assert t.tolist() == [0.0, 2.0, 4.0, 6.0]
    dist.monitored_barrier()
    g = dist.new_group([0])
    assert dist.get_process_group_ranks(g) == [0] and dist.get_global_rank(g, 0) == 0
    assert dist.new_subgroups(1)[0] is not None
    with pytest.raises(ValueError, match="destination rank should not be the same"):
        dist.send(t, dst=0)
    with pytest.raises(RuntimeError, match="Cannot use ReduceOp.BOR with non-integral dtype"):
        dist.reduce(t, dst=0, op=dist.ReduceOp.BOR)
    with pytest.raises(ValueError, match="Must specify src or group_src"):
        dist.broadcast(t)


def test_launcher_environment(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    for var in ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                "SLURM_LOCALID"):
        monkeypatch.delenv(var, raising=False)
    assert not dist.is_torchelastic_launched()
    with pytest.raises(RuntimeError, match="LOCAL_RANK is not in the environment"):
        dist.get_node_local_rank()
    assert dist.get_node_local_rank(fallback_rank=3) == 3
    monkeypatch.setenv("MPI_LOCALRANKID", "1")  # MPICH's Hydra
    assert dist.get_node_local_rank() == 1
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    assert dist.get_node_local_rank() == 2 and dist.is_torchelastic_launched()
