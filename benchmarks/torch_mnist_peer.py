"""PyTorch CPU doing the training `plugtorch train` does, for seconds-per-epoch comparisons.

Same data files (read with plugtorch's IDX reader), same normalisation, models,
optimizer, batch size and evaluation; batches are gathered from one big tensor
as plugtorch's DataLoader does. Pin threads the same way for both, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/torch_mnist_peer.py --model cnn --epochs 3 --batch-size 64 \
        --threads 1 --data-dir data
    OMP_NUM_THREADS=1 plugtorch train --model cnn --epochs 3 --batch-size 64 --data-dir data
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# plugtorch only reads the data files here. Its NumPy backend would tune glibc's malloc for the
# whole process when it loads (backends/numpy_backend/allocator.py): keep PyTorch's process as a
# PyTorch user has it.
os.environ.setdefault("PLUGTORCH_TUNE_MALLOC", "0")
from plugtorch.datasets import MNIST, FashionMNIST

DATASETS = {"mnist": MNIST, "fashion-mnist": FashionMNIST}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.dropout = nn.Dropout(0.25)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc2(self.dropout(F.relu(self.fc1(x.flatten(1)))))


def load(cls, data_dir, train, limit):
    ds = cls(data_dir, train=train)
    x = torch.from_numpy(ds.data.numpy()[:limit]).float().div_(255).unsqueeze(1)
    x = (x - cls.mean) / cls.std
    return x, torch.from_numpy(ds.targets.numpy()[:limit])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", choices=sorted(DATASETS), default="mnist")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--limit-train", type=int, default=None)
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cls = DATASETS[args.dataset]
    xtr, ytr = load(cls, args.data_dir, True, args.limit_train)
    xte, yte = load(cls, args.data_dir, False, None)
    model = (MLP if args.model == "mlp" else CNN)()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    epoch_seconds, epoch_cpu = [], []
    for epoch in range(args.epochs):
        model.train()
        g = torch.Generator().manual_seed(args.seed + epoch)
        perm = torch.randperm(len(xtr), generator=g)
        start, cpu_start = time.perf_counter(), time.process_time()
        for i in range(0, len(perm), args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        epoch_seconds.append(time.perf_counter() - start)
        epoch_cpu.append(time.process_time() - cpu_start)
        model.eval()
        with torch.no_grad():
            correct = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                          for i in range(0, len(xte), 1000))
        print(f"epoch {epoch + 1}: {epoch_seconds[-1]:.2f} s, test acc {100 * correct / len(xte):.2f}%",
              flush=True)
    print(json.dumps({"framework": f"torch {torch.__version__}", "threads": args.threads,
                      "dataset": args.dataset, "model": args.model, "epochs": args.epochs,
                      "batch_size": args.batch_size, "test_accuracy": correct / len(xte),
                      "seconds_per_epoch": float(np.mean(epoch_seconds)),
                      "epoch_seconds": epoch_seconds,
                      "cpu_seconds_per_epoch": float(np.mean(epoch_cpu))}))


if __name__ == "__main__":
    main()
