"""Plugin discovery, registration, conflicts and the contract version."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap

import pytest

import plugtorch
from plugtorch.core.errors import MissingKernelError, PluginError
from plugtorch.core.registry import OpDef

from .plugin_helpers import numpy_clone_backend, plugin, unavailable_backend


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=120)


def test_numpy_backend_is_discovered_through_its_entry_point():
    eps = importlib.metadata.entry_points(group="plugtorch")
    assert "plugtorch_backends.numpy_backend" in {ep.value for ep in eps}
    backend = plugtorch.get_registry().backends["numpy"]
    assert backend.plugin == "numpy"  # registered under the entry point's name, like any plugin


def test_disable_autoload_leaves_no_backends_and_says_so():
    r = run_python("""
        import plugtorch
        try:
            plugtorch.zeros(2)
        except plugtorch.BackendUnavailableError as e:
            print("ERR", e)
    """, PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD="1")
    assert r.returncode == 0, r.stderr
    assert "unknown backend 'numpy'" in r.stdout and "Available backends: (none)" in r.stdout


def test_plugtorch_plugins_env_loads_named_modules():
    r = run_python("""
        import plugtorch
        print(plugtorch.zeros(2).device, plugtorch.list_plugins())
    """, PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD="1", PLUGTORCH_PLUGINS="plugtorch_backends.numpy_backend")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("numpy") and "plugtorch_backends.numpy_backend" in r.stdout


def test_plugtorch_plugins_env_with_a_missing_module_names_it():
    r = run_python("import plugtorch; plugtorch.zeros(1)", PLUGTORCH_PLUGINS="no_such_plugin_mod")
    assert r.returncode != 0
    assert "PLUGTORCH_PLUGINS names 'no_such_plugin_mod'" in r.stderr


def test_register_plugin_at_run_time_adds_a_backend():
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(numpy_clone_backend("rt_backend"))))
    t = plugtorch.ones(3, device="rt_backend")
    assert t.device.type == "rt_backend"
    assert (t + t).tolist() == [2.0, 2.0, 2.0]


def test_two_plugins_registering_one_kernel_is_an_error_naming_both():
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(numpy_clone_backend("dup_backend"))))
    plugtorch.register_plugin(plugin(lambda r: r.add_kernel("softplus", "dup_backend", lambda x, **kw: x)),
                              name="first_plugin")
    with pytest.raises(PluginError, match="both plugin 'first_plugin' and plugin 'second_plugin'"):
        plugtorch.register_plugin(plugin(lambda r: r.add_kernel("softplus", "dup_backend",
                                                                lambda x, **kw: x)),
                                  name="second_plugin")


def test_override_replaces_a_kernel_when_asked():
    calls = []

    def fused_relu(x):
        calls.append(x.shape)
        return x * (x > 0)

    plugtorch.register_plugin(plugin(lambda r: r.add_backend(numpy_clone_backend("ov_backend"))))
    plugtorch.register_plugin(plugin(lambda r: r.add_kernel("relu", "ov_backend", fused_relu)))
    plugtorch.register_plugin(plugin(lambda r: r.add_kernel("relu", "ov_backend", fused_relu,
                                                            override=True)))
    x = plugtorch.tensor([-1.0, 2.0], device="ov_backend", requires_grad=True)
    y = plugtorch.relu(x)
    assert calls == [(2,)]  # the registered kernel ran, not the decomposition
    y.sum().backward()      # and the core's derivative rule still applies to it
    assert x.grad.tolist() == [0.0, 1.0]


def test_composite_without_a_kernel_runs_its_decomposition():
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(numpy_clone_backend("bare_backend"))))
    assert "softmax" not in plugtorch.get_backend("bare_backend").kernels
    x = plugtorch.tensor([[1.0, 2.0, 3.0]], device="bare_backend")
    ref = plugtorch.softmax(plugtorch.tensor([[1.0, 2.0, 3.0]]), dim=1)
    assert plugtorch.softmax(x, dim=1).tolist()[0] == pytest.approx(ref.tolist()[0], rel=1e-6)


def test_missing_kernel_names_op_backend_and_plugins():
    prims = {"from_host": lambda obj, dt: __import__("numpy").asarray(obj, dtype="float32"),
             "copy": lambda x: x.copy(), "cast": lambda x, dt: x}
    import numpy as np

    from plugtorch.core.backend import Backend
    from plugtorch.core.dtypes import float32
    b = Backend("thin_backend", prims, dtype_of=lambda a: float32, is_native=lambda o: False)
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(b)), name="thin_plugin")
    t = plugtorch.tensor(np.ones(2, np.float32), device="thin_backend")
    with pytest.raises(MissingKernelError) as info:
        t.exp()
    msg = str(info.value)
    assert "op 'exp'" in msg and "backend 'thin_backend'" in msg and "thin_plugin" in msg


def test_plugin_for_another_contract_version_is_refused_with_advice():
    with pytest.raises(PluginError, match="written for plugin contract 999.*Upgrade the plugin"):
        plugtorch.register_plugin(plugin(lambda r: None, contract=999))


def test_plugin_without_a_contract_declaration_is_refused():
    with pytest.raises(PluginError, match="does not declare PLUGTORCH_CONTRACT"):
        plugtorch.register_plugin(plugin(lambda r: None, contract=None))


def test_a_backend_listing_a_non_primitive_is_refused():
    from plugtorch.core.backend import Backend
    b = Backend("odd_backend", {"softmax": lambda x: x}, dtype_of=lambda a: None,
                is_native=lambda o: False)
    with pytest.raises(PluginError, match="not primitives of contract"):
        plugtorch.register_plugin(plugin(lambda r: r.add_backend(b)))


def test_plugins_can_define_new_ops_that_dispatch_and_differentiate():
    from plugtorch.core.dispatch import call_op

    cube = OpDef("cube_test_op", decompose=lambda x: x * x * x,
                 derivative=lambda ctx, g: g * 3 * ctx.saved[0] * ctx.saved[0], save=("inputs",))
    plugtorch.register_plugin(plugin(lambda r: r.add_op(cube)), name="cube_plugin")
    assert plugtorch.get_registry().ops["cube_test_op"].plugin == "cube_plugin"
    x = plugtorch.tensor([2.0], requires_grad=True)
    call_op(cube, (x,), {}).sum().backward()
    assert x.grad.tolist() == [12.0]


def test_unavailable_backend_is_listed_with_its_reason():
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(
        unavailable_backend("gpu_test_backend", "installed, but no CUDA device"))))
    with pytest.raises(plugtorch.BackendUnavailableError) as info:
        plugtorch.zeros(1, device="gpu_test_backend")
    msg = str(info.value)
    assert "gpu_test_backend: installed, but no CUDA device" in msg and "numpy" in msg


def test_a_plugin_that_fails_halfway_leaves_nothing_behind():
    def register(r):
        r.add_backend(numpy_clone_backend("half_backend"))
        r.add_op(OpDef("half_op", decompose=lambda x: x * 2))
        raise RuntimeError("the plugin's own bug")

    before_ops = set(plugtorch.get_registry().ops)
    with pytest.raises(RuntimeError, match="the plugin's own bug"):
        plugtorch.register_plugin(plugin(register), name="half_plugin")
    reg = plugtorch.get_registry()
    assert "half_backend" not in reg.backends and set(reg.ops) == before_ops
    assert "half_plugin" not in reg.plugin_names()
    plugtorch.register_plugin(plugin(lambda r: r.add_op(OpDef("half_op", decompose=lambda x: x * 2))),
                              name="half_plugin")  # the name is free again
    plugtorch.unregister_plugin("half_plugin")
    assert "half_op" not in plugtorch.get_registry().ops
