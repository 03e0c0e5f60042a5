"""pytorch/examples vae/main.py (vendored in scripts/vae/, commit 77f55b9) runs unmodified on plugtorch
for two short epochs and its figures match PyTorch's run of the same script.

The two libraries draw different random numbers (initial weights, shuffling, the reparameterisation's
noise), so the losses cannot agree step for step: the comparison is that plugtorch's epoch and test
losses fall as PyTorch's do, to within 8% of PyTorch's (a wrong gradient or loss term moves
them by far more: an untrained VAE is at ~550 per image, two epochs here reach ~270)."""
from __future__ import annotations

import numpy as np
from example_script_harness import floats, run_script, torchvision_standin

import plugtorch

ARGV = ["--batch-size", "32", "--epochs", "2", "--log-interval", "4", "--no-accel"]


def _run(framework, data_root, tmp_path):
    saved: list = []
    (tmp_path / "results").mkdir(exist_ok=True)
    out = run_script("vae/main.py", ARGV, framework, tmp_path,
                     torchvision_standin(framework, data_root, n_train=256, n_test=64, saved_images=saved))
    return out, saved


def test_vae_trains_as_on_pytorch(torch, data_root, tmp_path):
    torch.set_num_threads(1)
    theirs, their_images = _run(torch, data_root, tmp_path)
    ours, our_images = _run(plugtorch, data_root, tmp_path)
    assert "Using device: cpu" in ours
    assert "Train Epoch: 2 [128/256 (50%)]" in ours
    epoch, their_epoch = (floats(r"Epoch: \d Average loss: ([\d.]+)", out) for out in (ours, theirs))
    test, their_test = (floats(r"Test set loss: ([\d.]+)", out) for out in (ours, theirs))
    assert len(epoch) == len(test) == 2
    assert epoch[1] < epoch[0] and test[1] < test[0]
    np.testing.assert_allclose(epoch, their_epoch, rtol=0.08)
    np.testing.assert_allclose(test, their_test, rtol=0.08)
    # each epoch saves the reconstructions (8 test images over their 8 decodings) and 64 samples
    assert [s[:2] for s in our_images] == [s[:2] for s in their_images] == [
        ("results/reconstruction_1.png", (16, 1, 28, 28)), ("results/sample_1.png", (64, 1, 28, 28)),
        ("results/reconstruction_2.png", (16, 1, 28, 28)), ("results/sample_2.png", (64, 1, 28, 28))]
