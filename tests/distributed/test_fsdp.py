"""plugtorch.distributed.fsdp.fully_shard: training under mpiexec equals one process, and the API's
errors and helpers in one process (a world of one: every collective is a copy).

One mpiexec job per world size runs ``mpi_scripts/fsdp_train.py`` on 2, 3 (uneven shards:
padding) and 4 ranks, for an MLP and a 2-block minGPT with each block fully_shard'ed, then the root.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from mpi_harness import _env, check, launch, needs_mpi

import plugtorch
import plugtorch.distributed as dist
from plugtorch import nn
from plugtorch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    full_state_dict,
    full_tensor,
    fully_shard,
    load_full_state_dict,
)


@needs_mpi
@pytest.mark.parametrize("nprocs, checks", [
    (2, ["mlp:default,wrapper", "gpt:default,dcp"]),
    # 3 ranks pad every shard; also reshard_after_forward=False and set_requires_gradient_sync
    (3, ["mlp:default,keep,accumulate,dcp", "gpt:default,accumulate"]),
    (4, ["mlp:default", "gpt:default"]),
])
def test_training_matches_one_process(nprocs, checks):
    runs = sum(len(c.split(",")) for c in checks)
    check(launch(nprocs, "fsdp_train.py", *checks, timeout=150), nprocs * runs)


@needs_mpi
def test_every_rank_posts_the_same_collectives():
    """PLUGTORCH_DISTRIBUTED_DEBUG checks each collective's kind, shapes and dtypes across ranks:
    prefetches, reductions and their order must agree on every rank."""
    env = _env(PLUGTORCH_DISTRIBUTED_DEBUG="1")
    check(launch(2, "fsdp_train.py", "gpt:accumulate", timeout=90, env=env), 2)


@pytest.fixture
def world():
    dist.init()
    return dist.get_world_size()


def _mlp(seed=0):
    plugtorch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))


def _torch_twin(model):
    twin = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    with torch.no_grad():
        for (_, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    return twin


def test_one_rank_trains_as_torch(world):
    model = _mlp()
    twin = _torch_twin(model)
    fully_shard(model[0])
    fully_shard(model)
    assert isinstance(model, FSDPModule) and type(model).__name__ == "FSDPSequential"
    opt = plugtorch.optim.AdamW(model.parameters(), lr=0.05)
    topt = torch.optim.AdamW(twin.parameters(), lr=0.05)
    x = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
    for _ in range(5):
        opt.zero_grad()
        model(plugtorch.tensor(x)).pow(2).mean().backward()
        opt.step()
        topt.zero_grad()
        twin(torch.tensor(x)).pow(2).mean().backward()
        topt.step()
    full = full_state_dict(model)
    for k, v in twin.state_dict().items():
        np.testing.assert_allclose(full[k].numpy(), v.numpy(), atol=1e-6)


def test_unshard_and_reshard_swap_the_parameters(world):
    model = fully_shard(_mlp())
    shard = model[0].weight
    assert tuple(shard.shape) == (-(-7 // world), 5)  # this rank's rows (all of them on one rank)
    model.unshard()
    assert model[0].weight is not shard and tuple(model[0].weight.shape) == (7, 5)
    model.reshard()
    assert model[0].weight is shard
    handle = model.unshard(async_op=True)
    handle.wait()
    assert tuple(model[2].weight.shape) == (3, 7)
    model.reshard()
    with pytest.raises(ValueError, match="parameter 'scale' is 0-d"):
        m = nn.Linear(2, 2)
        m.scale = nn.Parameter(plugtorch.tensor(1.0))
        fully_shard(m)


def test_full_state_dict_round_trip(world):
    src = _mlp(1)
    expected = {k: v.clone() for k, v in src.state_dict().items()}
    fully_shard(src)
    assert full_tensor(src[0].weight).shape == (7, 5)
    dst = fully_shard(_mlp(2))
    load_full_state_dict(dst, full_state_dict(src))
    for k, v in full_state_dict(dst).items():
        assert (v - expected[k]).abs().max().item() == 0.0
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        load_full_state_dict(dst, {**expected, "0.weight": plugtorch.zeros(2, 2)})
    with pytest.raises(RuntimeError, match=r"missing keys \['2.bias'\]"):
        load_full_state_dict(dst, {k: v for k, v in expected.items() if k != "2.bias"})
    with pytest.raises(ValueError, match="not a parameter sharded by fully_shard"):
        full_tensor(plugtorch.zeros(3))


def test_state_dict_holds_shards_for_distributed_checkpoint(world, tmp_path):
    from plugtorch.distributed.checkpoint import Shard
    model = fully_shard(_mlp())
    sd = model.state_dict()
    piece = sd["0.weight"]
    assert isinstance(piece, Shard) and piece.global_shape == (7, 5) and piece.offsets == (0, 0)
    plugtorch.save(sd, tmp_path / "sd.pt")  # a Shard of the world group pickles
    with plugtorch.no_grad():
        piece.tensor.mul_(2.0)  # the Shard's tensor is a view of this rank's rows
    model.load_state_dict(model.state_dict())
    model.unshard()
    assert isinstance(model.state_dict()["0.weight"], plugtorch.Tensor)  # full while unsharded
    model.reshard()


def test_gradient_accumulation_without_sync(world):
    model = fully_shard(_mlp())
    x = plugtorch.randn(4, 5)
    model.set_requires_gradient_sync(False)
    model(x).sum().backward()
    assert all(p.grad is None for p in model.parameters())
    model.set_requires_gradient_sync(True)
    model(x).sum().backward()
    ref = _mlp()
    ref(x).sum().backward()
    ref(x).sum().backward()
    assert (model[0].weight.grad - ref[0].weight.grad).abs().max().item() < 1e-6


def test_errors_name_the_problem(world):
    model = fully_shard(_mlp())
    with pytest.raises(ValueError, match="already fully_shard'ed"):
        fully_shard(model)
    with pytest.raises(TypeError, match="expects a plugtorch.nn.Module"):
        fully_shard(torch.nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="MixedPrecisionPolicy\\(param_dtype=plugtorch.bfloat16\\)"):
        fully_shard(_mlp(), mp_policy=MixedPrecisionPolicy(param_dtype=plugtorch.bfloat16))
    with pytest.raises(NotImplementedError, match="reshard_after_forward=2"):
        fully_shard(_mlp(), reshard_after_forward=2)
    with pytest.raises(ValueError, match="mesh must be a plugtorch.distributed.DeviceMesh"):
        fully_shard(_mlp(), mesh="world")
    fully_shard(_mlp(), mp_policy=MixedPrecisionPolicy(param_dtype=plugtorch.float32),
                offload_policy=CPUOffloadPolicy())
    with pytest.raises(ValueError, match="expects FSDPModules"):
        model.set_modules_to_forward_prefetch([nn.Linear(2, 2)])


def test_unused_parameter_is_reported_at_the_next_forward(world):
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

        def forward(self, x):
            return self.a(x)

    model = fully_shard(TwoHeads())
    model(plugtorch.randn(2, 3)).sum().backward()
    with pytest.raises(RuntimeError, match=r"produced no gradient for \[.b.weight., .b.bias.\]"):
        model(plugtorch.randn(2, 3))


def test_mesh_is_a_one_dimensional_device_mesh(world):
    from plugtorch.distributed.device_mesh import init_device_mesh
    model = fully_shard(_mlp(), mesh=init_device_mesh("cpu", (world,)))
    model(plugtorch.randn(2, 5)).sum().backward()
    assert model[0].weight.grad is not None
    with pytest.raises(NotImplementedError, match="only a 1-D mesh is supported"):
        fully_shard(_mlp(), mesh=init_device_mesh("cpu", (world, 1), mesh_dim_names=("dp", "x")))


def test_ignored_params_stay_whole(world):
    model = _mlp()
    fully_shard(model, ignored_params={model[2].bias})
    assert model[2].bias.shape == (3,) and model._fsdp_state.group.params[-1].fqn == "2.weight"


def test_wrapper_trains_clips_and_saves_as_torch(world):
    from plugtorch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from plugtorch.distributed.fsdp.wrap import ModuleWrapPolicy
    inner = _mlp()
    twin = _torch_twin(inner)
    model = FSDP(inner, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    assert isinstance(model.module._modules["0"], FSDP)  # each Linear wrapped in its own
    opt = plugtorch.optim.SGD(model.parameters(), lr=0.1)
    topt = torch.optim.SGD(twin.parameters(), lr=0.1)
    x = np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32)
    for _ in range(3):
        opt.zero_grad()
        model(plugtorch.tensor(x)).pow(2).sum().backward()
        norm = model.clip_grad_norm_(0.5)
        opt.step()
        topt.zero_grad()
        twin(torch.tensor(x)).pow(2).sum().backward()
        tnorm = torch.nn.utils.clip_grad_norm_(twin.parameters(), 0.5)
        topt.step()
        assert abs(norm.item() - tnorm.item()) < 1e-4 * tnorm.item()
    sd = model.state_dict()
    assert list(sd) == list(twin.state_dict())  # torch's FULL_STATE_DICT names
    for k, v in twin.state_dict().items():
        np.testing.assert_allclose(sd[k].numpy(), v.numpy(), atol=1e-6)
    with FSDP.summon_full_params(model):
        assert tuple(inner[0].weight.shape) == (7, 5)
        with plugtorch.no_grad():
            inner[0].weight.zero_()
    assert model.state_dict()["0.weight"].abs().max().item() == 0.0  # written back
    model.load_state_dict(sd)
    assert (model.state_dict()["0.weight"] - sd["0.weight"]).abs().max().item() == 0.0
    with pytest.raises(RuntimeError, match=r"missing keys \['2.bias'\]"):
        model.load_state_dict({k: v for k, v in sd.items() if k != "2.bias"})
    with pytest.raises(NotImplementedError, match="sharding_strategy=ShardingStrategy.NO_SHARD"):
        from plugtorch.distributed.fsdp import ShardingStrategy
        FSDP(_mlp(), sharding_strategy=ShardingStrategy.NO_SHARD)
