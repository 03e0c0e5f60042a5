"""pytorch/examples time_sequence_prediction/train.py (vendored in scripts/time_sequence_prediction/,
commit 77f55b9) runs unmodified on plugtorch: two LSTMCells in float64 trained by LBFGS, with the
1000-step prediction and its figure after each step, from the same start as on PyTorch; the losses
printed at every LBFGS evaluation and the test loss agree with PyTorch's to float64 rounding.

The two libraries draw different initial weights, so the test hands the LBFGS optimizer the weights
PyTorch's run started from (the one place both runs share: the optimizer receives the model's
parameters); the script itself is not touched. The data is generate_sine_wave.py's recipe with fewer
and shorter waves (10 of 40 points, not 100 of 1000) to keep the run short. torch >= 2.6 loads the
NumPy array in traindata.pt only with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, the setting a user of this
script makes (or torch.load refuses the file), and plugtorch.load honours it as torch does."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from example_script_harness import floats, run_script

import plugtorch


def _sine_waves(N=10, L=40, T=20):
    """generate_sine_wave.py's data (its seed and formula), N waves of L points."""
    np.random.seed(2)
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    return np.sin(x / 1.0 / T).astype('float64')


def _run(framework, tmp_path, monkeypatch, start):
    """Run the script for one LBFGS step; ``start`` is filled with (or gives) the initial weights."""
    folder = tmp_path / framework.__name__
    folder.mkdir()
    framework.save(_sine_waves(), folder / "traindata.pt")

    class LBFGS(framework.optim.LBFGS):
        def __init__(self, params, *args, **kwargs):
            params = list(params)
            with framework.no_grad():
                for i, p in enumerate(params):
                    if start.get(i) is None:
                        start[i] = p.detach().numpy().copy()
                    else:
                        p.copy_(framework.from_numpy(start[i]))
            super().__init__(params, *args, **kwargs)

    monkeypatch.setattr(framework.optim, "LBFGS", LBFGS)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
        out = run_script("time_sequence_prediction/train.py", ["--steps", "1"], framework, folder)
    monkeypatch.undo()
    assert (folder / "predict0.pdf").stat().st_size > 1000
    return floats(r"(?m)^loss: ([\d.e-]+)$", out), floats(r"test loss: ([\d.e-]+)", out), out


def test_lbfgs_lstm_cells_train_as_on_pytorch(torch, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the script draws its predictions with matplotlib")
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    torch.set_num_threads(1)
    start: dict = {}
    their_losses, their_test, _ = _run(torch, tmp_path, monkeypatch, start)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    assert len(start) == 10  # the two LSTMCells' four tensors each, the Linear's two
    losses, test, out = _run(plugtorch, tmp_path, monkeypatch, start)
    assert out.startswith("STEP:  0\nloss: ")
    assert len(losses) == len(their_losses) == 20  # LBFGS's max_iter evaluations
    assert losses[-1] < losses[0] / 5
    np.testing.assert_allclose(losses, their_losses, rtol=1e-6)
    np.testing.assert_allclose(test, their_test, rtol=1e-5)
