"""The ``plugtorch`` command line (``plugtorch train ...`` or ``python -m plugtorch train ...``)."""
from __future__ import annotations

import argparse
import sys

from ..core.errors import BackendUnavailableError
from ..datasets import ChecksumError, DatasetNotFoundError, IDXFormatError


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from .train import DATASETS, MODELS, OPTIMIZERS, SCHEDULES
    parser = argparse.ArgumentParser(prog="plugtorch", description=(
        "plugtorch: a PyTorch-compatible framework whose ops dispatch through plugins."))
    parser.add_argument("--version", action="version", version=f"plugtorch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    t = sub.add_parser("train", help="train an MLP or a CNN on MNIST / Fashion-MNIST",
                       description="Train a classifier and report its test accuracy. Under "
                                   "mpirun/mpiexec the ranks train one model data-parallel.")
    t.add_argument("--dataset", choices=sorted(DATASETS), default="mnist")
    t.add_argument("--model", choices=sorted(MODELS), default="mlp",
                   help="mlp: 784-128-10; cnn: conv16-pool-conv32-pool-fc128-dropout-fc10")
    t.add_argument("--epochs", type=_positive(int), default=None,
                   help="default: 5 for the mlp, 3 for the cnn")
    t.add_argument("--batch-size", type=_positive(int), default=None,
                   help="global batch size, split across ranks (default: 128 for the mlp, "
                        "64 for the cnn)")
    t.add_argument("--lr", type=_positive(float), default=1e-3)
    t.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    t.add_argument("--lr-schedule", choices=SCHEDULES, default="cosine",
                   help="per-epoch learning-rate schedule (default: cosine annealing from --lr "
                        "over the run, which lands the MLP recipe ~0.1 points higher on average "
                        "over seeds than a constant rate; see benchmarks/RESULTS.md)")
    t.add_argument("--backend", default=None,
                   help="backend for the model and batches (default: PLUGTORCH_BACKEND or numpy)")
    t.add_argument("--compile", action="store_true",
                   help="capture the training step once per batch shape and replay its kernels "
                        "(plugtorch.compile); runs eagerly, with a warning saying why, where it cannot")
    t.add_argument("--data-dir", default=None,
                   help="data root holding mnist/ and fashion-mnist/ (a clone of plugtorch has "
                        "MNIST in data/: --data-dir data; default: $PLUGTORCH_DATA, else "
                        "~/.cache/plugtorch; /usr/share/datasets is searched too)")
    t.add_argument("--no-download", dest="download", action="store_false",
                   help="never download missing dataset files")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--checkpoint", metavar="PATH", default=None,
                   help="write a checkpoint here after every epoch")
    t.add_argument("--resume", action="store_true",
                   help="continue from --checkpoint if it exists; a larger --epochs extends a "
                        "finished run (the lr schedule is laid out again over the new length)")
    t.add_argument("--metrics-json", metavar="PATH", default=None,
                   help="write the final metrics (accuracy, losses, throughput, ...) as JSON")
    t.add_argument("--limit-train", type=_positive(int), default=None, metavar="N",
                   help="train on the first N samples only")
    t.add_argument("--limit-test", type=_positive(int), default=None, metavar="N",
                   help="evaluate on the first N samples only")
    t.add_argument("--quiet", action="store_true",
                   help="print only the final accuracy (no progress bar or epoch lines)")
    t.add_argument("--log-csv", metavar="PATH", default=None,
                   help="write loss, accuracy and lr per epoch as CSV (after every epoch)")
    t.add_argument("--plot", metavar="PATH", default=None,
                   help="draw loss and accuracy per epoch, train and test, into an image "
                        "(.png/.svg/.pdf; needs matplotlib: pip install 'plugtorch[plot]')")
    t.add_argument("--tensorboard", metavar="DIR", default=None,
                   help="write a TensorBoard event log into DIR (needs tensorboard: "
                        "pip install 'plugtorch[tensorboard]')")
    t.add_argument("--export", metavar="PATH", default=None,
                   help="write the trained weights as safetensors, loadable by PyTorch "
                        "(needs safetensors: pip install 'plugtorch[safetensors]')")
    v = sub.add_parser("viz", help="draw the autograd graph of a model's loss",
                       description="Build the model `plugtorch train` trains, run one batch of "
                                   "random images through it and its loss, and draw the autograd "
                                   "graph: SVG/PNG/PDF through Graphviz's `dot` when it is "
                                   "installed, DOT text otherwise (or with a .dot path, or -).")
    v.add_argument("--model", choices=sorted(MODELS), default="mlp")
    v.add_argument("-o", "--output", metavar="PATH", default="graph.svg",
                   help="where to write: .svg, .png or .pdf (through dot), .dot/.gv for the "
                        "DOT text, - for DOT on stdout (default: graph.svg)")
    v.add_argument("--show-attrs", action="store_true",
                   help="also print each op's non-tensor arguments")
    p = sub.add_parser("plugins", help="list plugins, backends, and what serves each op",
                       description="The loaded plugins (package, version, entry point, contract; "
                                   "failed ones with their traceback), the backends (available or why "
                                   "not), and for each op which plugin's kernel, primitive or "
                                   "decomposition computes it on each backend.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--op", metavar="NAME", default=None, help="only this op")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "plugins":
        from ..core import plugin_report
        return plugin_report.main(args.json, args.op)
    if args.command == "viz":
        from .viz import main as viz_main
        return viz_main(args.model, args.output, args.show_attrs)
    if args.command == "train":
        from .train import TrainConfig, train
        from .train_outputs import MissingDependencyError
        options = {k: v for k, v in vars(args).items() if k != "command"}
        try:
            train(TrainConfig(**options))
        except (DatasetNotFoundError, ChecksumError, IDXFormatError, BackendUnavailableError,
                MissingDependencyError, ValueError) as e:
            print(f"plugtorch train: error: {e}", file=sys.stderr)
            return _failed(1)
        except KeyboardInterrupt:
            print("\nplugtorch train: interrupted", file=sys.stderr)
            return _failed(130)
    return 0


def _failed(status: int) -> int:
    """The exit status of an error; under mpiexec with N ranks, end every rank with it
    (the others would otherwise wait forever for this one in their next collective)."""
    from .. import distributed as dist
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.abort(status)
    return status
