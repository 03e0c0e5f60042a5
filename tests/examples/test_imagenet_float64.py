"""imagenet/main.py's training step (torchvision's ResNet, stood in for, trained by SGD with momentum
0.9, weight decay 1e-4 and lr 0.1 on a batch of 2 with BatchNorm in train mode) agrees with PyTorch's
to float64 rounding over three steps: the loss, every gradient, BatchNorm's running statistics and
every weight after each step.

This is what tells the drift test_imagenet.py allows apart from a bug: in float32 the two libraries'
weights differ by a few percent of the update after two steps, but so do PyTorch's float32 and
float64 runs of the same steps (rounding in 224x224 sums, amplified by BatchNorm over two images);
in float64 the libraries agree to ~1e-12. The model is ResNet-18 cut to one block per stage and the
images are 48x48, so that the last stage's BatchNorm still normalises 8 values per channel (at 1x1,
two values per channel, the step is ill-conditioned: PyTorch against itself with the input scaled by
1 + 1e-14 drifts by 1e-3 in three steps)."""
from __future__ import annotations

import numpy as np
from torchvision_resnet import resnet_models

import plugtorch

STEPS, SIZE = 3, 48


def _resnet10(lib):
    model = resnet_models(lib).resnet18(num_classes=10)
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        del stage[1]  # each stage keeps its first block (the one with the downsample)
    return model.double().train()


def _rel(mine, want):
    mine, want = np.asarray(mine, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return np.linalg.norm(mine - want) / max(np.linalg.norm(want), 1e-300)


def test_resnet_sgd_steps_agree_with_pytorch_in_float64(torch):
    torch.manual_seed(0)
    theirs = _resnet10(torch)
    ours = _resnet10(plugtorch)
    ours.load_state_dict({k: plugtorch.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, SIZE, SIZE)), np.array([3, 7])
    libs = [(torch, theirs), (plugtorch, ours)]
    opts = [lib.optim.SGD(m.parameters(), 0.1, momentum=0.9, weight_decay=1e-4) for lib, m in libs]
    crits = [lib.nn.CrossEntropyLoss() for lib, _ in libs]
    for step in range(STEPS):
        losses = []
        for (lib, model), opt, crit in zip(libs, opts, crits):
            loss = crit(model(lib.from_numpy(x)), lib.from_numpy(y))
            opt.zero_grad()
            loss.backward()
            losses.append(loss.item())
        assert abs(losses[1] - losses[0]) <= 1e-11 * abs(losses[0]), (step, losses)
        want_params, our_params = dict(theirs.named_parameters()), dict(ours.named_parameters())
        assert list(our_params) == list(want_params)
        for name, p in want_params.items():
            assert _rel(our_params[name].grad.numpy(), p.grad.numpy()) <= 1e-10, (step, "grad", name)
        our_buffers = dict(ours.named_buffers())
        for name, b in theirs.named_buffers():  # updated by this step's forward
            if name.endswith("num_batches_tracked"):
                assert our_buffers[name].item() == b.item() == step + 1, (step, name)
            else:
                assert _rel(our_buffers[name].numpy(), b.numpy()) <= 1e-10, (step, name)
        for opt in opts:
            opt.step()
        for name, p in want_params.items():
            assert _rel(our_params[name].detach().numpy(), p.detach().numpy()) <= 1e-10, (step, "weight", name)
