"""``plugtorch.nn``: modules, layers, losses, initialisation and the functional API.

Written against the public tensor API only, so every layer runs on every backend.
"""
from . import functional, init, parallel, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter

__all__ = ["Buffer", "Parameter", "functional", "init", "parallel", "utils"] + _modules_all
