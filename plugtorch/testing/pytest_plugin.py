"""The conformance kit as a pytest plugin: ``pytest --plugtorch-conformance`` in any repository.

Installed with plugtorch (the ``pytest11`` entry point), so a plugin author adds nothing
but samples for their ops (``OpDef.samples`` or ``custom_op(..., samples=...)``) and runs::

    pytest --plugtorch-conformance                       # every op on every backend
    pytest --plugtorch-conformance --plugtorch-ops plugin:mylib --plugtorch-backends numpy

The options only choose what :mod:`plugtorch.testing.conformance` collects; that module
is added to the session as a test file, so its tests, ids and messages are the same as
in plugtorch's own suite.
"""
from __future__ import annotations

import os
import pathlib

_FLAG = "--plugtorch-conformance"


def pytest_addoption(parser):
    group = parser.getgroup("plugtorch", "plugtorch conformance kit")
    group.addoption(_FLAG, action="store_true", default=False,
                    help="run plugtorch's conformance suite over the registered ops and backends")
    group.addoption("--plugtorch-ops", default=None, metavar="LIST",
                    help="comma-separated ops to check; plugin:NAME for every op a plugin defines")
    group.addoption("--plugtorch-backends", default=None, metavar="LIST",
                    help="comma-separated backends to check (default: every available one and its "
                         "_bare twin)")


def _value(args, option):
    for i, a in enumerate(args):
        if a == option and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(option + "="):
            return a.split("=", 1)[1]
    return None


def pytest_load_initial_conftests(early_config, parser, args):
    if _FLAG not in args:
        return
    # The conformance module reads its selection when imported, so set it before collection.
    for option, env in (("--plugtorch-ops", "PLUGTORCH_CONFORMANCE_OPS"),
                        ("--plugtorch-backends", "PLUGTORCH_CONFORMANCE_BACKENDS")):
        value = _value(args, option)
        if value is not None:
            os.environ[env] = value
    args.append(str(pathlib.Path(__file__).with_name("conformance.py")))
