"""ZeroRedundancyOptimizer: under mpiexec on 2, 3 and 4 ranks (3 catches power-of-two
assumptions) against a plain AdamW on the global batch, and its argument checks in one process."""
from __future__ import annotations

import pytest
from mpi_harness import check, launch, needs_mpi

import plugtorch
import plugtorch.distributed as dist
from plugtorch.distributed.optim import ZeroRedundancyOptimizer


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_zero_with_ddp_matches_one_process_adamw(nprocs):
    check(launch(nprocs, "zero_train.py", timeout=90), nprocs)


@pytest.fixture
def world():
    dist.init()
    yield
    dist.destroy_process_group()


def test_one_process_steps_like_the_wrapped_optimizer(world):
    torch = pytest.importorskip("torch")
    lin = plugtorch.nn.Linear(3, 2)
    tlin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(lin.weight.tolist()))
        tlin.bias.copy_(torch.tensor(lin.bias.tolist()))
    zero = ZeroRedundancyOptimizer(lin.parameters(), plugtorch.optim.Adam, lr=0.1)
    topt = torch.optim.Adam(tlin.parameters(), lr=0.1)
    x = [[1.0, 2.0, -1.0], [0.5, -0.3, 2.0]]
    for _ in range(3):
        zero.zero_grad()
        lin(plugtorch.tensor(x)).pow(2).sum().backward()
        zero.step()
        topt.zero_grad()
        tlin(torch.tensor(x)).pow(2).sum().backward()
        topt.step()
    assert lin.weight.reshape(-1).tolist() == pytest.approx(tlin.weight.reshape(-1).tolist(), abs=1e-6)
    zero.consolidate_state_dict()
    assert sorted(zero.state_dict()["state"]) == [0, 1]


def test_bad_arguments_raise_as_torch(world):
    with pytest.raises(TypeError, match="should be an iterable of Tensors"):
        ZeroRedundancyOptimizer(plugtorch.zeros(2, requires_grad=True), plugtorch.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="ZeroRedundancyOptimizer got an empty parameter list"):
        ZeroRedundancyOptimizer([], plugtorch.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="must have a 'params' key"):
        ZeroRedundancyOptimizer([{"lr": 0.1}], plugtorch.optim.SGD, lr=0.1)
    with pytest.raises(NotImplementedError, match="overlap_with_ddp=True"):
        ZeroRedundancyOptimizer([plugtorch.zeros(2, requires_grad=True)], plugtorch.optim.SGD,
                                overlap_with_ddp=True, lr=0.1)
    zero = ZeroRedundancyOptimizer([plugtorch.zeros(2, requires_grad=True)], plugtorch.optim.SGD, lr=0.1)
    with pytest.raises(RuntimeError, match=r"consolidate_state_dict\(to=0\)"):
        zero.state_dict()
