"""The main job: train an MLP or a CNN on MNIST / Fashion-MNIST (``plugtorch train``).

One loop serves one process and N data-parallel ranks. Everything that depends
on the world lives in :class:`World`: the global ``batch_size`` is split across
ranks, each rank draws its share of every epoch's permutation from
``DistributedSampler`` (seeded by ``seed + epoch``, so one process and N ranks
see the same global batches), the model is wrapped in
``DistributedDataParallel``, evaluation metrics are summed over ranks, and only
rank 0 prints and writes checkpoints and metrics.

A checkpoint written after each epoch holds the model, optimizer, scheduler,
RNG state and epoch count, so ``--resume`` continues to the same parameters an
uninterrupted run reaches; with a larger ``--epochs`` it extends a run (finished or not),
laying the learning-rate schedule out again over the new length.

``--log-csv``, ``--plot``, ``--tensorboard`` and ``--export`` are written by
``train_outputs.py`` (rank 0, after every epoch; the weights at the end).
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import plugtorch
from plugtorch import Tensor, nn, optim
from plugtorch import distributed as dist
from plugtorch.apps import train_data
from plugtorch.apps import train_outputs as outputs
from plugtorch.datasets import MNIST, FashionMNIST
from plugtorch.nn import functional as F
from plugtorch.optim.lr_scheduler import CosineAnnealingLR, StepLR
from plugtorch.optim.optimizer import ParamsT
from plugtorch.utils.atomic import atomic_write
from plugtorch.utils.data import DataLoader, Dataset, DistributedSampler, Subset
from plugtorch.utils.progress import ProgressBar

DATASETS = {"mnist": MNIST, "fashion-mnist": FashionMNIST}
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
SCHEDULES = ("constant", "step", "cosine")
CHECKPOINT_FORMAT = "plugtorch.train/1"


@dataclass
class TrainConfig:
    dataset: str = "mnist"
    model: str = "mlp"
    epochs: int | None = None       # None: the model's recipe (RECIPES)
    batch_size: int | None = None   # global, split across ranks; None: the model's recipe
    lr: float = 1e-3
    optimizer: str = "adam"
    lr_schedule: str = "cosine"        # see the --lr-schedule help in cli.py
    backend: str | None = None
    data_dir: str | None = None
    seed: int = 0
    checkpoint: str | None = None
    resume: bool = False
    metrics_json: str | None = None
    quiet: bool = False
    limit_train: int | None = None
    limit_test: int | None = None
    eval_batch_size: int = 1000
    download: bool = True
    normalize: bool = True
    log_csv: str | None = None       # per-epoch metrics as CSV
    plot: str | None = None          # learning curves as an image (matplotlib)
    tensorboard: str | None = None   # a TensorBoard log directory (tensorboard)
    export: str | None = None        # the trained weights as safetensors (safetensors)
    compile: bool = False            # capture the training step and replay it (plugtorch.compile)


# -- models -------------------------------------------------------------------------------

class MLP(nn.Module):
    """784-128-10 with ReLU."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.relu(self.fc1(self.flatten(x))))


class CNN(nn.Module):
    """conv16-pool-conv32-pool-fc128-dropout-fc10 (3x3 convolutions, 'same' padding, ReLU)."""

    def __init__(self, num_classes: int = 10, dropout: float = 0.25) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(self.dropout(x))


MODELS = {"mlp": MLP, "cnn": CNN}
# The reference recipes (epochs, global batch size) that the defaults follow.
RECIPES = {"mlp": (5, 128), "cnn": (3, 64)}


def build_optimizer(name: str, params: ParamsT, lr: float) -> optim.Optimizer:
    if name == "adam":
        return optim.Adam(params, lr=lr)
    if name == "adamw":
        return optim.AdamW(params, lr=lr)
    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=0.9)
    if name == "rmsprop":
        return optim.RMSprop(params, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def build_scheduler(name: str, opt: optim.Optimizer, epochs: int) -> StepLR | CosineAnnealingLR | None:
    """Stepped once per epoch; ``constant`` keeps the learning rate (no scheduler)."""
    if name == "constant":
        return None
    if name == "step":
        return optim.lr_scheduler.StepLR(opt, step_size=max(epochs // 3, 1), gamma=0.1)
    if name == "cosine":
        return optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
    raise ValueError(f"unknown lr schedule {name!r}; choose one of {', '.join(SCHEDULES)}")


# -- the world: one process or N data-parallel ranks -----------------------------------------

class World:
    """The points where data-parallel training differs from one process."""

    def __init__(self) -> None:
        dist.init()
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()
        self.is_main = self.rank == 0

    def local_batch_size(self, global_batch: int) -> int:
        if global_batch % self.size:
            raise ValueError(f"--batch-size {global_batch} is the global batch and must divide "
                             f"evenly across {self.size} ranks; use a multiple of {self.size}")
        return global_batch // self.size

    def train_sampler(self, dataset: Dataset, seed: int) -> DistributedSampler:
        return DistributedSampler(dataset, num_replicas=self.size, rank=self.rank, shuffle=True,
                                  seed=seed)

    def eval_shard(self, dataset):
        """This rank's share of the test set: disjoint, no padding, so summed metrics are exact."""
        return dataset if self.size == 1 else Subset(dataset, range(self.rank, len(dataset), self.size))

    def wrap(self, model: nn.Module) -> nn.Module:
        if self.size == 1:
            return model
        return nn.parallel.DistributedDataParallel(model)

    def sum(self, values: list[float]) -> list[float]:
        if self.size == 1:
            return values
        t = plugtorch.tensor(values, dtype=plugtorch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()


# -- the loop -------------------------------------------------------------------------------

@dataclass
class EpochStats:
    epoch: int
    train_loss: float
    test_loss: float
    test_accuracy: float
    train_seconds: float
    samples: int
    lr: float = field(default=0.0)
    train_cpu_seconds: float = field(default=0.0)  # this process's CPU time: robust on a busy machine
    train_accuracy: float | None = field(default=None)  # running, in train mode (None: older runs)


class Trainer:
    def __init__(self, cfg: TrainConfig, out: TextIO | None = None) -> None:
        self.cfg = cfg
        self.out = out if out is not None else sys.stdout
        if cfg.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {cfg.dataset!r}; choose one of {', '.join(DATASETS)}")
        if cfg.model not in MODELS:
            raise ValueError(f"unknown model {cfg.model!r}; choose one of {', '.join(MODELS)}")
        epochs, batch = RECIPES[cfg.model]
        cfg.epochs = epochs if cfg.epochs is None else cfg.epochs
        cfg.batch_size = batch if cfg.batch_size is None else cfg.batch_size
        if cfg.backend:
            plugtorch.use(cfg.backend)
        self.device = plugtorch.current_backend()
        self.world = World()
        if self.world.is_main:  # before any data is read: a missing package stops the run now
            outputs.check_available(cfg)
        self.local_batch = self.world.local_batch_size(cfg.batch_size)
        ds_cls = DATASETS[cfg.dataset]
        self.mean, self.std = (ds_cls.mean, ds_cls.std) if cfg.normalize else (0.0, 1.0)
        # normalised once here where the sets are in memory and small enough (train_data.py)
        self.train_set, self.test_set, self._normalized = train_data.prepared(
            *self._datasets(), self.mean, self.std, ranks=self.world.size)

        plugtorch.manual_seed(cfg.seed)
        self.model = MODELS[cfg.model]()
        self.optimizer = build_optimizer(cfg.optimizer, self.model.parameters(), cfg.lr)
        self.scheduler = build_scheduler(cfg.lr_schedule, self.optimizer, cfg.epochs)
        self.start_epoch = 0
        self.history: list[EpochStats] = []
        self.tensorboard: outputs.TensorBoardLog | None = None
        if cfg.resume:
            self._resume()
        self.net = self.world.wrap(self.model)
        # --compile: captured once per batch shape, replayed after (plugtorch.compile)
        self._step = plugtorch.compile(self._train_step) if cfg.compile else self._train_step
        self.sampler = self.world.train_sampler(self.train_set, cfg.seed)
        self.train_loader = DataLoader(self.train_set, batch_size=self.local_batch,
                                       sampler=self.sampler)
        self.test_loader = DataLoader(self.world.eval_shard(self.test_set),
                                      batch_size=cfg.eval_batch_size)

    def _datasets(self) -> tuple[Dataset, Dataset]:
        cfg, cls = self.cfg, DATASETS[self.cfg.dataset]

        def load():
            return (cls(cfg.data_dir, train=True, download=cfg.download),
                    cls(cfg.data_dir, train=False, download=cfg.download))

        if self.world.is_main:  # rank 0 downloads what is missing; the others then read it
            try:
                train, test = load()
            finally:  # release the other ranks even on failure: they then fail the same way
                self.world.barrier()
        else:
            self.world.barrier()
            train, test = load()
        if cfg.limit_train is not None:
            train = Subset(train, range(min(cfg.limit_train, len(train))))
        if cfg.limit_test is not None:
            test = Subset(test, range(min(cfg.limit_test, len(test))))
        return train, test

    def _inputs(self, x, y):
        if self.cfg.normalize and not self._normalized:
            x = train_data.normalize(x, self.mean, self.std)
        return x.to(self.device), y.to(self.device)

    def log(self, msg: str) -> None:
        if self.world.is_main:
            print(msg, file=self.out, flush=True)

    # -- one epoch ------------------------------------------------------------------------
    def train_epoch(self, epoch: int) -> tuple[float, float, int, float, float]:
        """(mean loss, accuracy, samples, seconds, CPU seconds) of one epoch over all ranks."""
        self.net.train()
        self.sampler.set_epoch(epoch)
        steps = len(self.train_loader)
        bar = ProgressBar(steps, f"epoch {epoch + 1}/{self.cfg.epochs}",
                          enabled=self.world.is_main and not self.cfg.quiet)
        loss_sum, count, correct = 0.0, 0, None
        start, cpu_start = time.perf_counter(), time.process_time()
        for step, (x, y) in enumerate(self.train_loader):
            x, y = self._inputs(x, y)
            loss, hits = self._step(x, y)
            correct = hits if correct is None else correct + hits
            n, value = y.shape[0], loss.item()
            loss_sum += value * n
            count += n
            bar.update(n * self.world.size, value)
            if self.tensorboard is not None:
                self.tensorboard.step(epoch * steps + step + 1, value)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        bar.close()
        hit_count = float(correct.item()) if correct is not None else 0.0
        total_loss, total, hits = self.world.sum([loss_sum, float(count), hit_count])
        return total_loss / max(total, 1), hits / max(total, 1), int(total), seconds, cpu_seconds

    def _train_step(self, x, y):
        """One optimizer step: (the loss, the batch's correct predictions summed on the device)."""
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach(), (logits.detach().argmax(1) == y).sum()

    def evaluate(self) -> tuple[float, float]:
        """(mean loss, accuracy) over the whole test set, summed across ranks."""
        self.net.eval()
        loss_sum = correct = count = 0.0
        with plugtorch.no_grad():
            for x, y in self.test_loader:
                x, y = self._inputs(x, y)
                logits = self.net(x)
                loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
                correct += (logits.argmax(1) == y).sum().item()
                count += y.shape[0]
        loss_sum, correct, count = self.world.sum([loss_sum, correct, count])
        return loss_sum / max(count, 1), correct / max(count, 1)

    # -- checkpoints ----------------------------------------------------------------------
    def _identity(self) -> dict:
        """The settings a resumed run must share with its checkpoint (--epochs may grow)."""
        c = self.cfg
        return {"dataset": c.dataset, "model": c.model, "optimizer": c.optimizer,
                "lr_schedule": c.lr_schedule, "batch_size": c.batch_size, "seed": c.seed,
                "normalize": c.normalize}

    def save_checkpoint(self, epochs_done: int) -> None:
        if not self.cfg.checkpoint or not self.world.is_main:
            return
        state = {
            "format": CHECKPOINT_FORMAT,
            "config": {**self._identity(), "epochs": self.cfg.epochs},
            "epoch": epochs_done,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng_state": plugtorch.get_rng_state(),
            "history": [asdict(h) for h in self.history],
        }
        plugtorch.save(state, self.cfg.checkpoint)

    def _resume(self) -> None:
        path = self.cfg.checkpoint
        if not path:
            raise ValueError("--resume needs --checkpoint PATH (the file to resume from)")
        if not os.path.exists(path):
            self.log(f"no checkpoint at {path}; starting from scratch")
            return
        state = plugtorch.load(path)
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not a `plugtorch train` checkpoint")
        mismatched = {k: (v, state["config"].get(k)) for k, v in self._identity().items()
                      if state["config"].get(k) != v}
        if mismatched:
            detail = ", ".join(f"--{k.replace('_', '-')} {new} (checkpoint: {old})"
                               for k, (new, old) in mismatched.items())
            raise ValueError(f"cannot resume from {path}: this run has {detail}; use the same "
                             "settings or another --checkpoint path")
        done, planned = int(state["epoch"]), state["config"].get("epochs")
        assert self.cfg.epochs is not None  # set from the recipe by __init__
        if self.cfg.epochs < done:
            raise ValueError(f"cannot resume from {path}: it has trained {done} epochs already and "
                             f"this run asks for --epochs {self.cfg.epochs}; pass --epochs larger "
                             f"than {done} to extend it, or use another --checkpoint path")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            plan = {k: v for k, v in vars(self.scheduler).items() if k in ("T_max", "step_size")}
            self.scheduler.load_state_dict(state["scheduler"])
            if planned != self.cfg.epochs:  # lay the schedule out over the new length
                vars(self.scheduler).update(plan)
                lrs = self.scheduler._get_closed_form_lr()
                for group, lr in zip(self.optimizer.param_groups, lrs):
                    group["lr"] = lr
                self.scheduler._last_lr = list(lrs)
        plugtorch.set_rng_state(state["rng_state"])
        self.start_epoch = done
        self.history = [EpochStats(**h) for h in state["history"]]
        self.log(f"resumed from {path} after epoch {self.start_epoch}")
        if planned is not None and planned != self.cfg.epochs:
            schedule = ("" if self.scheduler is None else
                        f"; the {self.cfg.lr_schedule} schedule now spans {self.cfg.epochs} epochs")
            self.log(f"extending the run from {planned} to {self.cfg.epochs} epochs{schedule} "
                     f"(lr {self.optimizer.param_groups[0]['lr']:.3g} for epoch {done + 1})")

    # -- the run --------------------------------------------------------------------------
    def run(self) -> dict:
        cfg = self.cfg
        wall_start = time.perf_counter()
        n_params = sum(p.numel() for p in self.model.parameters())
        if not cfg.quiet:
            self.log(f"{cfg.model} ({n_params:,} parameters) on {cfg.dataset}: "
                     f"{len(self.train_set):,} train / {len(self.test_set):,} test samples, "
                     f"backend {self.device}, world size {self.world.size}, "
                     f"batch {cfg.batch_size}, {cfg.optimizer} lr {cfg.lr}")
        if cfg.tensorboard and self.world.is_main:
            self.tensorboard = outputs.TensorBoardLog(cfg.tensorboard)
        try:
            self._train_epochs()
            if self.history and self.start_epoch == cfg.epochs:  # nothing left to train
                self._write_logs()
        finally:
            if self.tensorboard is not None:
                self.tensorboard.close()
                self.tensorboard = None
        if cfg.export and self.world.is_main:
            outputs.export_weights(cfg.export, self.model)
        if self.history and self.history[-1].epoch == cfg.epochs:
            last = self.history[-1]
            test_loss, acc = last.test_loss, last.test_accuracy
        else:  # nothing left to train (resumed a finished run): measure the model as it is
            test_loss, acc = self.evaluate()
        run_epochs = self.history[self.start_epoch:]
        train_seconds = sum(h.train_seconds for h in run_epochs)
        train_samples = sum(h.samples for h in run_epochs)
        metrics = {
            "dataset": cfg.dataset, "model": cfg.model, "optimizer": cfg.optimizer,
            "lr": cfg.lr, "batch_size": cfg.batch_size, "epochs": cfg.epochs, "seed": cfg.seed,
            "test_accuracy": acc, "test_loss": test_loss,
            "train_loss": self.history[-1].train_loss if self.history else None,
            "train_accuracy": self.history[-1].train_accuracy if self.history else None,
            "samples_per_second": train_samples / train_seconds if train_seconds else None,
            "seconds_per_epoch": train_seconds / len(run_epochs) if run_epochs else None,
            "cpu_seconds_per_epoch": (sum(h.train_cpu_seconds for h in run_epochs) / len(run_epochs)
                                      if run_epochs else None),
            "wall_time_seconds": time.perf_counter() - wall_start,
            "backend": self.device, "world_size": self.world.size,
            "train_samples": len(self.train_set), "test_samples": len(self.test_set),
            "history": [asdict(h) for h in self.history],
        }
        self.log(f"final test accuracy {100 * acc:.2f}% (test loss {test_loss:.4f})")
        if cfg.metrics_json and self.world.is_main:
            _write_json(cfg.metrics_json, metrics)
        return metrics

    def _train_epochs(self) -> None:
        cfg = self.cfg
        assert cfg.epochs is not None  # set from the recipe by __init__
        for epoch in range(self.start_epoch, cfg.epochs):
            train_loss, train_acc, samples, seconds, cpu_seconds = self.train_epoch(epoch)
            lr = self.optimizer.param_groups[0]["lr"]
            if self.scheduler is not None:
                self.scheduler.step()
            test_loss, acc = self.evaluate()
            self.history.append(EpochStats(epoch + 1, train_loss, test_loss, acc, seconds,
                                           samples, lr, cpu_seconds, train_acc))
            if not cfg.quiet:
                self.log(f"epoch {epoch + 1}/{cfg.epochs}  train loss {train_loss:.4f}  "
                         f"test loss {test_loss:.4f}  test acc {100 * acc:.2f}%  "
                         f"{seconds:.1f} s  {samples / max(seconds, 1e-9):,.0f} samples/s")
            self.save_checkpoint(epoch + 1)
            self._write_logs()

    def _write_logs(self) -> None:
        """The per-epoch outputs asked for, rewritten after every epoch (rank 0)."""
        cfg, last = self.cfg, self.history[-1]
        if not self.world.is_main:
            return
        if cfg.log_csv:
            outputs.write_csv(cfg.log_csv, self.history)
        if cfg.plot:
            outputs.write_plot(cfg.plot, self.history,
                               f"{cfg.model} on {cfg.dataset}: test accuracy "
                               f"{100 * last.test_accuracy:.2f}% after {last.epoch} epochs")
        if self.tensorboard is not None:
            self.tensorboard.epoch(last)


def _write_json(path: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def train(cfg: TrainConfig | None = None, out: TextIO | None = None, **overrides: Any) -> dict:
    """Run a training job and return its metrics (``train(model="cnn", epochs=3)``)."""
    cfg = cfg or TrainConfig()
    for k, v in overrides.items():
        if not hasattr(cfg, k):
            raise TypeError(f"train() got an unexpected keyword argument {k!r}")
        setattr(cfg, k, v)
    return Trainer(cfg, out).run()
