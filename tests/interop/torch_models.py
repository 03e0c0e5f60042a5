"""PyTorch twins of plugtorch models (same attribute names, so the same state-dict keys)."""
from __future__ import annotations

import plugtorch
from plugtorch import nn


def torch_twin(torch, name: str):
    """The torch module matching ``plugtorch_model(name)``."""
    tnn, F = torch.nn, torch.nn.functional

    class MLP(tnn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = tnn.Flatten()
            self.fc1 = tnn.Linear(784, 128)
            self.fc2 = tnn.Linear(128, 10)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(self.flatten(x))))

    class CNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = tnn.Conv2d(16, 32, 3, padding=1)
            self.pool = tnn.MaxPool2d(2)
            self.fc1 = tnn.Linear(32 * 7 * 7, 128)
            self.dropout = tnn.Dropout(0.25)
            self.fc2 = tnn.Linear(128, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = F.relu(self.fc1(x.flatten(1)))
            return self.fc2(self.dropout(x))

    def bn():
        return tnn.Sequential(tnn.Conv2d(1, 4, 3), tnn.BatchNorm2d(4), tnn.ReLU(), tnn.Flatten(),
                              tnn.Linear(4 * 26 * 26, 8), tnn.BatchNorm1d(8), tnn.Linear(8, 10))

    return {"mlp": MLP, "cnn": CNN, "bn": bn}[name]()


def plugtorch_model(name: str):
    from plugtorch.apps.train import CNN, MLP
    if name == "bn":
        return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                             nn.Linear(4 * 26 * 26, 8), nn.BatchNorm1d(8), nn.Linear(8, 10))
    return {"mlp": MLP, "cnn": CNN}[name]()


def train_a_little(torch, model, steps: int = 3):
    """A few SGD steps in train mode, so BatchNorm's running statistics move off their init."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randn(8, 1, 28, 28, generator=gen)
        loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (8,), generator=gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def images(seed: int = 1, n: int = 5):
    import numpy as np
    return np.random.default_rng(seed).standard_normal((n, 1, 28, 28)).astype(np.float32)


def plugtorch_outputs(model, x):
    model.eval()
    with plugtorch.no_grad():
        return model(plugtorch.tensor(x)).numpy()
