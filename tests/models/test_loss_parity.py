"""The real models of ``benchmarks/models.py`` (a CIFAR-sized ResNet, minGPT with attention
written out and through ``scaled_dot_product_attention``, a TransformerEncoder stack, the
word-language-model LSTM) train as in PyTorch: from torch's initial weights (its state_dict
loaded), on the same batches, with dropout off, the loss of every AdamW step tracks torch's
within 1e-3 relative over the first 50 steps, and within 2 % at step 200. Float32 sums in
another order drift apart slowly; a gap beyond that is a bug (a wrong gradient, a missed
update). The models are the benchmark's, at smaller batch sizes."""
from __future__ import annotations

import importlib.util
import os
import pathlib

import numpy as np
import pytest

import plugtorch

_spec = importlib.util.spec_from_file_location(
    "bench_models_defs", pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "models.py")
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)

SMALL = {
    "resnet": lambda lib: models.resnet(lib, batch=4),
    "gpt": lambda lib: models.gpt(lib, batch=2, block=16),
    "gpt_sdpa": lambda lib: models.gpt(lib, batch=2, block=16, sdpa=True),
    "encoder": lambda lib: models.encoder(lib, batch=2, seq=16),
    "lstm": lambda lib: models.lstm(lib, batch=4, seq=10),
}


def _no_dropout(lib, model):
    for m in model.modules():
        if isinstance(m, lib.nn.Dropout):
            m.p = 0.0
        if isinstance(m, (lib.nn.LSTM, lib.nn.MultiheadAttention)):  # a float attribute, not a module
            m.dropout = 0.0


def _losses(lib, name, steps, state=None):
    model, x, y, loss_fn = SMALL[name](lib)
    _no_dropout(lib, model)
    if state is not None:
        model.load_state_dict(state)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return np.array(out), model


def _torch_run(torch, name, steps):
    losses, model = _losses(torch, name, steps)
    state = {k: plugtorch.tensor(v.detach().numpy()) for k, v in _initial_state(torch, name).items()}
    return losses, state


def _initial_state(torch, name):
    model, *_ = SMALL[name](torch)  # the builders seed torch: the same initial weights as _losses's
    return model.state_dict()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_first_50_losses_track_torchs(torch, name):
    torch.set_num_threads(1)
    theirs, state = _torch_run(torch, name, 50)
    ours, _ = _losses(plugtorch, name, 50, state)
    assert theirs[-1] < theirs[0]  # it trains: the comparison is of a moving loss
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, err_msg=f"{name}: losses part from torch's")


# every model at 200 steps takes minutes on two cores: the CI runs minGPT's (layer norm, GELU,
# attention, embedding, AdamW), PLUGTORCH_LONG_TESTS=1 the rest as well
LONG = sorted(SMALL) if os.environ.get("PLUGTORCH_LONG_TESTS") == "1" else ["gpt"]


@pytest.mark.parametrize("name", LONG)
def test_the_loss_at_step_200_is_within_2_percent_of_torchs(torch, name):
    torch.set_num_threads(1)
    theirs, state = _torch_run(torch, name, 200)
    ours, _ = _losses(plugtorch, name, 200, state)
    assert abs(ours[-1] - theirs[-1]) <= 0.02 * abs(theirs[-1]), (name, ours[-1], theirs[-1])
