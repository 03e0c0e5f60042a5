"""pytorch/examples imagenet/main.py (vendored in scripts/imagenet/, commit 77f55b9) runs unmodified on
plugtorch with ``--dummy``: torchvision's ResNet-18 (stood in for) trained by SGD with momentum and
weight decay under StepLR, validated, and checkpointed with torch's checkpoint layout (one epoch), from the same
start as PyTorch's run, with PyTorch's losses.

torchvision's FakeData is stood in for with at most 2 images (the script asks for 1281167 and 50000),
so that the epoch is one batch of each; the libraries draw different initial weights, so the test
hands the SGD optimizer the weights PyTorch's run started from. The training batch is shuffled by each
library's generator, but a batch of all the images gives the same mean loss and BatchNorm statistics
in any order."""
from __future__ import annotations

import re

import numpy as np
from example_script_harness import floats, run_script, same_start, torchvision_standin

import plugtorch

ARGV = ["--dummy", "-b", "2", "--epochs", "1", "-j", "0", "-p", "1", "--seed", "1", "--lr", "0.01"]


def _run(framework, tmp_path, monkeypatch, start):
    folder = tmp_path / framework.__name__
    folder.mkdir()
    same_start(monkeypatch, framework, "SGD", start)
    out = run_script("imagenet/main.py", ARGV, framework, folder,
                     torchvision_standin(framework, tmp_path, n_train=2, n_test=2))
    monkeypatch.undo()
    train = floats(r"Epoch: \[\d\]\[1/1\].*?Loss ([\d.e+-]+) ", out)
    return folder, out, train, floats(r"Test: .*?Loss ([\d.e+-]+) ", out)


def test_imagenet_dummy_trains_as_on_pytorch(torch, tmp_path, monkeypatch):
    torch.set_num_threads(1)
    start: dict = {}
    their_dir, _, their_train, their_val = _run(torch, tmp_path, monkeypatch, start)
    assert len(start) == 62  # ResNet-18's weights
    our_dir, out, train, val = _run(plugtorch, tmp_path, monkeypatch, start)
    assert "=> creating model 'resnet18'\nusing CPU, this will be slow\n=> Dummy data is used!\n" in out
    assert len(train) == len(their_train) == 1
    np.testing.assert_allclose(train, their_train, rtol=1e-3)
    np.testing.assert_allclose(val, their_val, rtol=1e-3)
    assert len(re.findall(r" \*   Acc@1 [\d.]+ Acc@5 [\d.]+\n", out)) == 1
    ours = torch.load(our_dir / "checkpoint.pth.tar")  # torch reads plugtorch's checkpoint
    theirs = torch.load(their_dir / "checkpoint.pth.tar")
    assert sorted(ours) == sorted(theirs) == ["arch", "best_acc1", "epoch", "optimizer", "scheduler", "state_dict"]
    assert ours["epoch"] == 1 and ours["arch"] == "resnet18"
    assert list(ours["state_dict"]) == list(theirs["state_dict"])
    assert ours["scheduler"]["_last_lr"] == theirs["scheduler"]["_last_lr"]
    # the SGD step moved every weight as on PyTorch: their difference is under 1% of the step
    # (float32 sums over 224x224 images through 18 layers differ by ~0.2% in conv1's gradient)
    buffers = ("running_mean", "running_var", "num_batches_tracked")
    weights = [k for k in theirs["state_dict"] if not k.endswith(buffers)]
    assert len(weights) == len(start)
    for i, name in enumerate(weights):
        mine, want = ours["state_dict"][name].numpy(), theirs["state_dict"][name].numpy()
        assert np.linalg.norm(mine - want) <= 1e-2 * np.linalg.norm(want - start[i]) + 1e-7, name
        assert np.linalg.norm(want - start[i]) > 0, name
