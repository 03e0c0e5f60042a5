"""plugtorch.distributed.checkpoint: save on 4 ranks, load on 1, 2 and 3; ZeRO resumed on another
world size; a rank killed mid-save leaves the previous checkpoint loadable; the state-dict
helpers against torch's; errors, in one process."""
from __future__ import annotations

import json
import os

import pytest
from mpi_harness import check, launch, needs_mpi

import plugtorch
import plugtorch.distributed.checkpoint as dcp
from plugtorch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


@needs_mpi
def test_saved_on_4_ranks_loads_on_1_2_and_3(tmp_path):
    path = tmp_path / "ckpt"
    check(launch(4, "dcp_shards.py", "save", path, timeout=60), 4)
    for n in (2, 3):
        check(launch(n, "dcp_shards.py", "load", path, 2, timeout=60), n)
    check(launch(0, "dcp_shards.py", "load", path, 2, timeout=60), 1)


@needs_mpi
def test_zero_checkpoint_resumes_on_3_ranks(tmp_path):
    path = tmp_path / "zero"
    check(launch(4, "dcp_zero.py", "save", path, timeout=60), 4)
    check(launch(3, "dcp_zero.py", "resume", path, timeout=60), 3)


@needs_mpi
@pytest.mark.parametrize("mode", ["crash-data", "crash-commit"])
def test_a_rank_killed_during_save_leaves_the_previous_checkpoint(tmp_path, mode):
    path = tmp_path / "ckpt"
    result = launch(4, "dcp_shards.py", mode, path, timeout=60)
    assert result.returncode != 0 and "outlived" not in result.stderr, result.stderr
    check(launch(0, "dcp_shards.py", "load", path, 1, timeout=60), 1)


def test_one_process_round_trip_in_place(tmp_path):
    model = plugtorch.nn.Linear(3, 2)
    opt = plugtorch.optim.Adam(model.parameters(), lr=0.1)
    model(plugtorch.ones(1, 3)).sum().backward()
    opt.step()
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd, "epoch": 3}, checkpoint_id=tmp_path)
    meta = json.loads((tmp_path / ".metadata").read_text())
    assert meta["format"] == "plugtorch.dcp" and "model.weight" in meta["tensors"]
    assert meta["objects"]["optim.param_groups.0.lr"] == 0.1

    fresh = plugtorch.nn.Linear(3, 2)
    fresh_opt = plugtorch.optim.Adam(fresh.parameters(), lr=1.0)
    msd2, osd2 = get_state_dict(fresh, fresh_opt)
    sd = {"model": msd2, "optim": osd2, "epoch": 0}
    dcp.load(sd, checkpoint_id=tmp_path)
    set_state_dict(fresh, fresh_opt, model_state_dict=msd2, optim_state_dict=osd2)
    assert sd["epoch"] == 3 and fresh_opt.param_groups[0]["lr"] == 0.1
    assert fresh.weight.tolist() == model.weight.tolist()
    for k in ("exp_avg", "exp_avg_sq"):
        assert fresh_opt.state[fresh.weight][k].tolist() == opt.state[model.weight][k].tolist()


def test_helpers_give_torchs_keys():
    torch = pytest.importorskip("torch")
    from torch.distributed.checkpoint.state_dict import get_state_dict as torch_get_state_dict
    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    pm = plugtorch.nn.Sequential(plugtorch.nn.Linear(2, 3), plugtorch.nn.ReLU(), plugtorch.nn.Linear(3, 1))
    tmsd, tosd = torch_get_state_dict(tm, torch.optim.Adam(tm.parameters(), lr=0.1))
    pmsd, posd = get_state_dict(pm, plugtorch.optim.Adam(pm.parameters(), lr=0.1))
    assert list(pmsd) == list(tmsd)
    assert list(posd["state"]) == list(tosd["state"])
    assert {k: sorted(v) for k, v in posd["state"].items()} == {k: sorted(v) for k, v in tosd["state"].items()}
    assert posd["param_groups"][0]["params"] == tosd["param_groups"][0]["params"]
    assert sorted(posd["param_groups"][0]) == sorted(tosd["param_groups"][0])


def test_full_state_dict_gathers_a_shard_and_cpu_offload_copies():
    class Sharded(plugtorch.nn.Module):
        def state_dict(self, *args, **kwargs):
            return {"w": dcp.Shard(plugtorch.arange(6.0).reshape(2, 3), 0, (2, 3))}
    full = get_model_state_dict(Sharded(), options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    assert full["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(NotImplementedError, match="broadcast_from_rank0"):
        get_model_state_dict(Sharded(), options=StateDictOptions(broadcast_from_rank0=True))


def test_errors_name_the_key_and_what_to_do(tmp_path):
    with pytest.raises(RuntimeError, match="`checkpoint_id` must be specified"):
        dcp.save({"a": plugtorch.ones(1)})
    dcp.save({"a": plugtorch.ones(2, 2)}, checkpoint_id=tmp_path)
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: b."):
        dcp.load({"b": plugtorch.ones(1)}, checkpoint_id=tmp_path)
    with pytest.raises(RuntimeError, match=r"Size mismatch between saved \[2, 2\] and current: \[3\] for a"):
        dcp.load({"a": plugtorch.ones(3)}, checkpoint_id=tmp_path)
    with pytest.raises(TypeError, match="'x' holds a object"):
        dcp.save({"x": object()}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match="hold 3 of its 6 elements"):
        dcp.save({"s": dcp.Shard(plugtorch.ones(1, 3), 0, (2, 3))}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match="does not fit"):
        dcp.Shard(plugtorch.ones(2, 3), 1, (2, 3))
    with pytest.raises(RuntimeError, match="already holds a checkpoint"):
        dcp.save({"a": plugtorch.ones(1)}, storage_writer=dcp.FileSystemWriter(tmp_path, overwrite=False))
    with pytest.raises(FileNotFoundError, match="holds no committed checkpoint"):
        dcp.load({"a": plugtorch.ones(1)}, checkpoint_id=tmp_path / "none")
    assert sorted(os.listdir(tmp_path))[0] == ".metadata"  # the failed saves left the first one
    out = {"a": plugtorch.zeros(2, 2)}
    dcp.load(out, checkpoint_id=tmp_path)
    assert out["a"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
