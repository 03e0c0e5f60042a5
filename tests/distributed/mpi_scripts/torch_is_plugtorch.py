"""Run a torch script with ``import torch`` resolving to plugtorch (as
tests/examples/example_script_harness.py does in-process), for launchers that start it in
fresh processes: ``python -m torch_is_plugtorch SCRIPT ARGS...``.

``PLUGTORCH_TEST_DIE_AT=RANK:STEP`` makes that rank ``os._exit(1)`` at its STEP-th
DistributedDataParallel forward (counting from 0) on a job's first attempt only
(``TORCHELASTIC_RESTART_COUNT`` 0): a crash mid-epoch, with no cleanup, in a script that
cannot be edited to crash itself. ``PLUGTORCH_TEST_SAY_HOST=1`` prints where each worker runs
("worker RANK on HOST, node GROUP_RANK, local rank LOCAL_RANK"), which the scripts do not say.
``PLUGTORCH_TEST_SEED=N`` seeds plugtorch's generator with N on every rank before the script
runs, for scripts that draw (a random_split, say) without seeding, so two runs can be compared.
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import socket
import sys


class _TorchAsPlugtorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import torch.X`` gives ``plugtorch.X`` itself, so classes are plugtorch's own."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("plug" + spec.name)

    def exec_module(self, module):
        pass


def _die_at(spec: str) -> None:
    rank, step = (int(v) for v in spec.split(":"))
    if os.environ.get("RANK") != str(rank) or os.environ.get("TORCHELASTIC_RESTART_COUNT") != "0":
        return
    from plugtorch.nn.parallel import DistributedDataParallel
    forward, calls = DistributedDataParallel.forward, [0]

    def counted(self, *args, **kwargs):
        if calls[0] == step:
            sys.stdout.flush()
            os._exit(1)
        calls[0] += 1
        return forward(self, *args, **kwargs)
    DistributedDataParallel.forward = counted


sys.meta_path.insert(0, _TorchAsPlugtorch())
if os.environ.get("PLUGTORCH_TEST_SAY_HOST") == "1":
    print(f"worker {os.environ['RANK']} on {socket.gethostname()}, node {os.environ['GROUP_RANK']}, "
          f"local rank {os.environ['LOCAL_RANK']}", flush=True)
if os.environ.get("PLUGTORCH_TEST_SEED"):
    import plugtorch
    plugtorch.manual_seed(int(os.environ["PLUGTORCH_TEST_SEED"]))
if os.environ.get("PLUGTORCH_TEST_DIE_AT"):
    _die_at(os.environ["PLUGTORCH_TEST_DIE_AT"])
script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(script)  # the script's own folder first, as `python script.py` has it
runpy.run_path(script, run_name="__main__")
