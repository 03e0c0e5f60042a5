"""Train a small MLP on MNIST in plain user code: the loop `plugtorch train` runs, spelled out.

    python examples/mnist_mlp.py --epochs 5                 # in a clone: reads data/mnist/
    python examples/mnist_mlp.py --data-dir ~/data --out-dir runs/try1

The data pipeline is a torchvision one with its imports changed (`plugtorch.vision`):
MNIST is read from DATA_DIR/mnist/ or DATA_DIR/MNIST/raw/ (downloaded there when
missing). It reaches about 97.5% test accuracy in 5 epochs and writes its checkpoint
under --out-dir (default runs/mnist_mlp/), never into the current directory.
"""
import argparse
import os

import plugtorch
import plugtorch.nn as nn
import plugtorch.nn.functional as F
from plugtorch.utils.data import DataLoader
from plugtorch.vision import datasets, transforms


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = x.flatten(1)                 # [B, 1, 28, 28] -> [B, 784]
        return self.fc2(F.relu(self.fc1(x)))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with plugtorch.no_grad():
        for images, labels in loader:
            predictions = model(images).argmax(dim=1)
            correct += (predictions == labels).sum().item()
            total += labels.shape[0]
    return correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--out-dir", default=os.path.join("runs", "mnist_mlp"))
    args = parser.parse_args()

    plugtorch.manual_seed(0)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train_set = datasets.MNIST(args.data_dir, train=True, download=True, transform=tf)
    test_set = datasets.MNIST(args.data_dir, train=False, download=True, transform=tf)
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True,
                              generator=plugtorch.Generator().manual_seed(0))
    test_loader = DataLoader(test_set, batch_size=1000)

    model = MLP()
    optimizer = plugtorch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(args.epochs):
        model.train()
        for step, (images, labels) in enumerate(train_loader):
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 100 == 0:
                print(f"epoch {epoch + 1} step {step:3d}  loss {loss.item():.4f}")
        print(f"epoch {epoch + 1}: test accuracy {100 * evaluate(model, test_loader):.2f}%")

    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "mnist_mlp.pt")
    plugtorch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
