"""``import torch`` gives plugtorch (and ``import torch.X`` plugtorch.X itself), for vendored
pytorch/examples scripts run unmodified in subprocesses: the folder holding this file goes first on
PYTHONPATH, so that the spawned workers of torch.multiprocessing resolve ``torch`` the same way."""
import importlib
import importlib.abc
import importlib.machinery
import sys

import plugtorch


class _TorchAsPlugtorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torch."):
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("plug" + spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _TorchAsPlugtorch())
sys.modules["torch"] = plugtorch
