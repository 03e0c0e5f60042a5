"""NumPy and another backend train the MNIST CNN identically: same state_dict, same batches.

    python benchmarks/cupy_parity.py --backend cupy --steps 50 --batch 64          # on a GPU
    python benchmarks/cupy_parity.py --backend cupy --compile                       # replayed, fused
    PLUGTORCH_PLUGINS=plugtorch_backends.cupy_backend.emulation \\
        python benchmarks/cupy_parity.py --backend cupy_emulated --steps 3 --batch 4  # on the CPU

Dropout is off (the backends draw different random streams); each step's loss on the
other backend must be within ``--rtol`` (1e-4) of NumPy's. Prints one JSON line with
both loss curves and the largest relative difference; exits 1 when they differ.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.apps.train import CNN
from plugtorch.datasets.mnist import MNIST


def losses(backend: str, state, images, labels, steps: int, batch: int, compiled: bool = False) -> list[float]:
    model = CNN(dropout=0.0)
    model.load_state_dict(state)
    model.to(backend)
    opt = plugtorch.optim.Adam(model.parameters(), lr=1e-3)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    if compiled:  # captured and replayed (on CuPy: with its elementwise chains fused)
        step = plugtorch.compile(step, fullgraph=True)
    out = []
    for i in range(steps):
        sl = slice(i * batch, (i + 1) * batch)
        x = plugtorch.tensor(images[sl], device=backend)
        y = plugtorch.tensor(labels[sl], device=backend)
        out.append(float(step(x, y).item()))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="cupy")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--compile", action="store_true", help="run the other backend's step under plugtorch.compile")
    p.add_argument("--data-dir", default=os.environ.get("PLUGTORCH_DATA", "data"))
    args = p.parse_args(argv)
    ds = MNIST(args.data_dir, train=True)
    n = args.steps * args.batch
    images = (ds.data[:n].numpy().astype(np.float32) / 255.0)[:, None]
    labels = ds.targets[:n].numpy()
    plugtorch.manual_seed(0)
    state = {k: v.detach().clone() for k, v in CNN(dropout=0.0).state_dict().items()}
    ref = losses("numpy", state, images, labels, args.steps, args.batch)
    other = losses(args.backend, state, images, labels, args.steps, args.batch, compiled=args.compile)
    rel = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(ref, other))
    ok = rel <= args.rtol
    print(json.dumps({"backend": args.backend, "compiled": args.compile, "steps": args.steps, "batch": args.batch,
                      "numpy": ref, args.backend: other, "max_rel_diff": rel, "rtol": args.rtol, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
