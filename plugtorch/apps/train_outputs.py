"""What ``plugtorch train`` writes besides its own output: a CSV log, a picture of the learning
curves, a TensorBoard event log, and the trained weights as safetensors.

The plot and the event log need optional packages (matplotlib, tensorboard; safetensors for
``--export``). :func:`check_available` runs before training starts, so a missing one stops
the run at once with the ``pip install`` that fixes it, not after an hour of training.
Everything is written by rank 0 only, after each epoch (the final weights at the end), with
atomic replaces: a run stopped at any point leaves complete files of the epochs it finished.
"""
from __future__ import annotations

import csv
import io
import os

from ..utils.atomic import atomic_write

CSV_FIELDS = ("epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy", "lr",
              "train_seconds", "samples")

_NEEDS = {  # option -> (module to import, package, extra)
    "plot": ("matplotlib", "matplotlib", "plot"),
    "tensorboard": ("tensorboard.summary", "tensorboard", "tensorboard"),
    "export": ("safetensors.numpy", "safetensors", "safetensors"),
}


class MissingDependencyError(ModuleNotFoundError):
    """An output was asked for whose optional package is not installed."""


def check_available(cfg) -> None:
    """Raise, naming the install command, for each requested output whose package is missing."""
    import importlib
    missing = []
    for option, (module, package, extra) in _NEEDS.items():
        if getattr(cfg, option, None):
            try:
                importlib.import_module(module)
            except ImportError:
                missing.append(f"--{option.replace('_', '-')} needs {package}: pip install "
                               f"'plugtorch[{extra}]' (or pip install {package})")
    if missing:
        raise MissingDependencyError("; ".join(missing))


def _parent(path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


def write_csv(path: str, history) -> None:
    """One row per finished epoch (the whole history, so a resumed run's file is complete)."""
    _parent(path)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for h in history:
        writer.writerow({k: getattr(h, k) for k in CSV_FIELDS})
    with atomic_write(path, "w") as f:
        f.write(buf.getvalue())


def write_plot(path: str, history, title: str) -> None:
    """Loss and accuracy per epoch, train and test, side by side; the format follows the
    extension (png, svg, pdf). Uses matplotlib's object API: no pyplot state, no display."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    epochs = [h.epoch for h in history]
    # train numbers are running means over each epoch (dropout on), test ones are measured
    # after it: the legend says so, or the early gap between them looks like a bug
    train, test = "train (mean during the epoch)", "test (after the epoch)"
    fig = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(fig)
    loss, acc = fig.subplots(1, 2)
    loss.plot(epochs, [h.train_loss for h in history], "o-", label=train)
    loss.plot(epochs, [h.test_loss for h in history], "s-", label=test)
    loss.set(title="Loss (cross-entropy)", xlabel="epoch", ylabel="loss")
    train_acc = [h.train_accuracy for h in history]
    if all(a is not None for a in train_acc):
        acc.plot(epochs, [100 * a for a in train_acc], "o-", label=train)
    acc.plot(epochs, [100 * h.test_accuracy for h in history], "s-", label=test)
    acc.set(title="Accuracy", xlabel="epoch", ylabel="accuracy (%)")
    last = history[-1]
    acc.annotate(f"{100 * last.test_accuracy:.2f}%", (last.epoch, 100 * last.test_accuracy),
                 textcoords="offset points", xytext=(-6, -16), ha="right", fontsize=9)
    for ax in (loss, acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    _parent(path)
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    with atomic_write(path) as f:
        fig.savefig(f, format=fmt, dpi=120)


class TensorBoardLog:
    """Scalars in a TensorBoard event file: per epoch (loss, accuracy, lr) and per step (loss)."""

    def __init__(self, logdir: str):
        from tensorboard.summary import Writer
        os.makedirs(logdir, exist_ok=True)
        self.writer = Writer(logdir)

    def step(self, global_step: int, loss: float) -> None:
        self.writer.add_scalar("loss/train_step", loss, step=global_step)

    def epoch(self, h) -> None:
        add = self.writer.add_scalar
        add("loss/train", h.train_loss, step=h.epoch)
        add("loss/test", h.test_loss, step=h.epoch)
        if h.train_accuracy is not None:
            add("accuracy/train", h.train_accuracy, step=h.epoch)
        add("accuracy/test", h.test_accuracy, step=h.epoch)
        add("lr", h.lr, step=h.epoch)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def export_weights(path: str, model) -> None:
    """The trained weights as safetensors, loadable by ``safetensors.torch.load_file``."""
    from ..interop.safetensors import save_file
    _parent(path)
    save_file(model.state_dict(), path, metadata={"format": "pt"})
