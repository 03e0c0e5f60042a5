"""pytorch/examples dcgan/main.py (vendored in scripts/dcgan/, commit 77f55b9) runs unmodified on
plugtorch with ``--dataset fake`` (torchvision's FakeData stood in for: 64 random 64x64 images) for two
epochs of four batches, with small networks through the script's own --nz/--ngf/--ndf, as on PyTorch.

Each step draws new noise from the library's generator, and the libraries' generators differ, so the
losses cannot agree step for step: the comparison is that the discriminator learns on both (Loss_D
falls from ~1.4 and D(x) rises, within 0.15 of PyTorch's at the last step; a wrong gradient in a
ConvTranspose2d/BatchNorm2d/BCELoss leaves them at chance), and that the checkpoints the script saves
are PyTorch's: torch.load reads plugtorch's netG/netD files, with torch's keys and shapes."""
from __future__ import annotations

import re

import numpy as np
from example_script_harness import run_script, torchvision_standin

import plugtorch

ARGV = ["--dataset", "fake", "--workers", "0", "--batchSize", "16", "--nz", "16", "--ngf", "8", "--ndf", "8",
        "--niter", "2", "--manualSeed", "1", "--outf", "out"]
STEP = re.compile(r"\[(\d)/2\]\[(\d)/4\] Loss_D: ([\d.]+) Loss_G: ([\d.]+) D\(x\): ([\d.]+) "
                  r"D\(G\(z\)\): ([\d.]+) / ([\d.]+)")


def _run(framework, tmp_path, saved):
    folder = tmp_path / framework.__name__
    folder.mkdir()
    out = run_script("dcgan/main.py", ARGV, framework, folder,
                     torchvision_standin(framework, tmp_path, n_train=64, n_test=0, saved_images=saved))
    return folder / "out", out, np.array([[float(v) for v in m] for m in STEP.findall(out)])


def test_dcgan_fake_data_trains_as_on_pytorch(torch, tmp_path):
    torch.set_num_threads(1)
    their_saved: list = []
    our_saved: list = []
    their_dir, _, theirs = _run(torch, tmp_path, their_saved)
    our_dir, out, ours = _run(plugtorch, tmp_path, our_saved)
    assert "Random Seed:  1" in out and "Using device: cpu" in out
    assert "ConvTranspose2d(16, 64, kernel_size=(4, 4), stride=(1, 1), bias=False)" in out
    assert ours.shape == theirs.shape == (8, 7)
    np.testing.assert_array_equal(ours[:, :2], theirs[:, :2])  # epochs and batch numbers
    for steps in (ours, theirs):
        assert 1.2 < steps[0, 2] < 1.6 and steps[-1, 2] < steps[0, 2] - 0.2  # Loss_D
        assert steps[-1, 4] > steps[0, 4] + 0.05  # D(x)
    np.testing.assert_allclose(ours[-1, 2:], theirs[-1, 2:], atol=0.15)
    # each epoch's first batch saves the real batch and the fixed noise's fakes
    assert [(p, shape) for p, shape, _ in our_saved] == [(p, shape) for p, shape, _ in their_saved] == [
        ("out/real_samples.png", (16, 3, 64, 64)), ("out/fake_samples_epoch_000.png", (16, 3, 64, 64)),
        ("out/real_samples.png", (16, 3, 64, 64)), ("out/fake_samples_epoch_001.png", (16, 3, 64, 64))]
    # the real batches (shuffled differently) hold FakeData's uniform pixels: ToTensor's [0, 1], mean 1/2
    np.testing.assert_allclose([our_saved[0][2], their_saved[0][2]], 0.5, atol=0.01)
    for name in ("netG_epoch_1.pth", "netD_epoch_1.pth"):
        ours_sd, theirs_sd = torch.load(our_dir / name), torch.load(their_dir / name)
        assert [(k, tuple(v.shape)) for k, v in ours_sd.items()] == [(k, tuple(v.shape)) for k, v in theirs_sd.items()]
