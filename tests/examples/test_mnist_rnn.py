"""pytorch/examples mnist_rnn/main.py (vendored in scripts/mnist_rnn/, commit 77f55b9) runs unmodified
on plugtorch (LSTM, BatchNorm1d, Dropout2d on 2-D input with torch's deprecation warning, Adadelta,
StepLR) for two short epochs, as on PyTorch.

The libraries draw different initial weights, shuffles and dropout masks, so the losses cannot agree
step for step: both runs' training losses fall by the same margin and their test losses agree to
0.1 (an untrained model sits at ln 10 = 2.30; a broken LSTM gradient leaves it there). --lr 1.0,
the script's own option, instead of 0.1, so that 20 steps on 320 images learn something."""
from __future__ import annotations

import warnings

from example_script_harness import floats, run_script, torchvision_standin

import plugtorch

ARGV = ["--batch-size", "32", "--test-batch-size", "100", "--epochs", "2", "--log-interval", "3", "--lr", "1.0"]


def _run(framework, data_root, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_script("mnist_rnn/main.py", ARGV, framework, tmp_path,
                         torchvision_standin(framework, data_root, n_train=320, n_test=200))
    assert any("Received a 2-D input to dropout2d" in str(w.message) for w in caught)
    train = floats(r"Loss: ([\d.]+)", out)
    test = floats(r"Test set: Average loss: ([\d.]+)", out)
    return out, train, test


def test_mnist_rnn_trains_as_on_pytorch(torch, data_root, tmp_path):
    torch.set_num_threads(1)
    _, their_train, their_test = _run(torch, data_root, tmp_path)
    out, train, test = _run(plugtorch, data_root, tmp_path)
    assert "Train Epoch: 2 [288/320 (90%)]" in out and "Accuracy: " in out
    assert len(train) == len(their_train) == 8 and len(test) == 2
    for losses in (train, their_train):
        assert 2.2 < losses[0] < 2.5 and losses[-1] < losses[0] - 0.3
    assert test[1] < test[0] and their_test[1] < their_test[0]
    assert abs(test[1] - their_test[1]) < 0.1
