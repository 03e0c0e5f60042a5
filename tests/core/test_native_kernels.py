"""The NumPy backend's native (C) kernels: built wherever a C compiler is, and optional. With
``PLUGTORCH_NATIVE_KERNELS=0``, without the extension, or with one built from older sources (an
editable install not rebuilt after a pull), the backend registers its NumPy kernels,
``native.status()`` says why, and the same model trains alike."""
from __future__ import annotations

import json
import os
import shutil
import sysconfig

import pytest
from plugtorch_backends.numpy_backend import native

from .fresh_process import script_lines

STEP = """
import json
import sys
if sys.argv[1] == "not built":  # as an install without a C compiler has it
    sys.modules["plugtorch_backends.numpy_backend.native._kernels"] = None
elif sys.argv[1] == "stale":  # built from older sources, then the sources moved on
    import types
    sys.modules["plugtorch_backends.numpy_backend.native._kernels"] = types.ModuleType("_kernels")
import plugtorch as pt
from plugtorch_backends.numpy_backend import native
kernels = pt.get_registry().backends["numpy"].kernels
print(native.status())
print(json.dumps(sorted({kernels[op].__module__ for op in ("conv2d_weight_grad", "max_pool2d_backward",
                                                          "adam_step_", "cross_entropy", "fold") if op in kernels})))
pt.manual_seed(0)
model = pt.nn.Sequential(pt.nn.Conv2d(1, 4, 3, padding=1), pt.nn.ReLU(), pt.nn.MaxPool2d(2), pt.nn.Flatten(),
                         pt.nn.Linear(4 * 4 * 4, 3))
opt = pt.optim.Adam(model.parameters(), 1e-2)
x, y = pt.randn(8, 1, 8, 8), pt.tensor([0, 1, 2, 0, 1, 2, 0, 1])
for _ in range(5):
    opt.zero_grad()
    loss = pt.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print(repr(loss.item()))
"""


def _run(how, env_value):
    return script_lines(STEP, how, "PLUGTORCH_NATIVE_KERNELS", env_value)


def test_built_wherever_a_c_compiler_is():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: the install leaves the extension out by design")
    if os.environ.get("PLUGTORCH_NATIVE_KERNELS") == "0":
        pytest.skip("PLUGTORCH_NATIVE_KERNELS=0 turns the extension off in this run")
    assert native.enabled(), native.status()


@pytest.mark.skipif(not native.enabled(), reason=native.status())
@pytest.mark.parametrize("how, env_value, reason", [("variable", "0", "PLUGTORCH_NATIVE_KERNELS=0"),
                                                    ("not built", None, "not built"),
                                                    ("stale", None, "stale (interface None, these sources expect")])
def test_without_them_the_numpy_kernels_run_and_train_alike(how, env_value, reason):
    status, modules, loss = _run(how, env_value)
    assert status.startswith("native kernels off: ") and reason in status, status
    assert all(".native" not in m for m in json.loads(modules))
    on_status, on_modules, on_loss = _run("built", None)
    assert on_status.startswith("native kernels on: ") and any(".native." in m for m in json.loads(on_modules))
    assert abs(float(loss) - float(on_loss)) < 1e-5  # float rounding apart (the cross-entropy's exp)
