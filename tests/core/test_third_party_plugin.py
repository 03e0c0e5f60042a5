"""The op plugin example (examples/third_party_plugin, ``plugtorch-squareplus``), pip-installed as a user would.

It is discovered through its entry point, shows in ``plugtorch plugins`` with its
package, version, entry point and contract, serves its op with its NumPy kernel, trains
in a model, honours the allow-list, and passes the conformance kit run as its author
would run it. Each check runs plugtorch in a fresh interpreter (see example_packages).
"""
from __future__ import annotations

import json

import pytest

from .example_packages import guide_block, install_examples, run_cli, run_conformance, run_python

OP = "squareplus::squareplus"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return install_examples(tmp_path_factory)


def test_the_package_is_discovered_through_its_entry_point(site):
    r = run_python(site, """
        import plugtorch
        rec = plugtorch.core.plugins.plugin_records()["squareplus"]
        print(rec.status, rec.source, rec.distribution, rec.version, rec.contract, repr(rec.entry_point))
        reg = plugtorch.get_registry()
        print(reg.ops["squareplus::squareplus"].plugin, reg.kernel_owner("squareplus::squareplus", "numpy"))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "loaded entry point plugtorch-squareplus 0.2.0 1 'squareplus = plugtorch_squareplus:lib'",
        "squareplus squareplus",
    ]


def test_plugtorch_plugins_shows_the_package_and_what_serves_its_op(site):
    r = run_cli(site, "plugins", "--op", OP)
    assert r.returncode == 0, r.stderr
    lines = [line.split() for line in r.stdout.splitlines()]
    # what docs/plugins.md shows: the package, version, entry point and contract; its kernel on NumPy
    shown = guide_block("tests/core/test_third_party_plugin.py::"
                        "test_plugtorch_plugins_shows_the_package_and_what_serves_its_op")
    assert len(shown) == 3 and all(line.split() in lines for line in shown), (shown, r.stdout)
    # where the package has no kernel, the op's own function (on the backend's arrays) computes it
    assert ["arrayapi", "lowering", "onto", "primitives"] in lines

    r = run_cli(site, "plugins", "--json", "--op", OP)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    plugin = next(p for p in report["plugins"] if p["name"] == "squareplus")
    assert {k: plugin[k] for k in ("status", "distribution", "version", "entry_point", "contract", "error")} == {
        "status": "loaded", "distribution": "plugtorch-squareplus", "version": "0.2.0",
        "entry_point": "squareplus = plugtorch_squareplus:lib", "contract": 1, "error": None}
    assert list(report["ops"]) == [OP]
    assert report["ops"][OP]["defined_by"] == "squareplus"
    assert report["ops"][OP]["backends"]["numpy"]["served_by"] == "kernel from squareplus"


def test_the_op_trains_in_a_model_and_has_gradients_of_every_order(site):
    r = run_python(site, """
        import numpy as np
        import plugtorch
        from plugtorch import nn
        from plugtorch.autograd import gradcheck, gradgradcheck
        from plugtorch_squareplus import Squareplus, squareplus

        x = plugtorch.tensor([-2.0, 0.0, 3.0], dtype=plugtorch.float64, requires_grad=True)
        y = plugtorch.ops.squareplus.squareplus(x)
        print(y.grad_fn.name(), [round(v, 6) for v in y.tolist()])
        print(gradcheck(squareplus, (x,)), gradgradcheck(lambda t: squareplus(t, 0.5), (x,)))

        plugtorch.manual_seed(0)
        model = nn.Sequential(nn.Linear(2, 16), Squareplus(), nn.Linear(16, 1))
        opt = plugtorch.optim.Adam(model.parameters(), lr=0.05)
        inputs = plugtorch.randn(64, 2)
        target = (inputs[:, :1] * inputs[:, 1:]).tanh()        # not linear: the layer has to work
        losses = []
        for _ in range(60):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(repr(model[1]), losses[-1] < 0.5 * losses[0])
    """)
    assert r.returncode == 0, r.stderr
    first, second, third = r.stdout.splitlines()
    # (x + sqrt(x*x + 4)) / 2 at -2, 0, 3, from the package's NumPy kernel, recorded as the op
    assert first == "SquareplusSquareplusBackward0 [0.414214, 1.0, 3.302776]"
    assert second == "True True"
    assert third == "Squareplus(b=4.0) True"


def test_the_op_runs_on_another_backend_through_its_array_namespace(site):
    # no kernel for arrayapi: the op's function runs on array_api_strict arrays there
    r = run_python(site, """
        import plugtorch
        from plugtorch_squareplus import squareplus
        x = plugtorch.tensor([-2.0, 0.0, 3.0], device="arrayapi", requires_grad=True)
        y = squareplus(x, 1.0)
        y.sum().backward()
        print(y.device, [round(v, 5) for v in y.tolist()], [round(v, 5) for v in x.grad.tolist()])
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "arrayapi [0.11803, 0.5, 3.08114] [0.05279, 0.5, 0.97434]"


def test_the_allow_list_and_autoload_switch_leave_the_package_out(site):
    code = """
        import plugtorch
        rec = plugtorch.core.plugins.plugin_records().get("squareplus")
        print(rec.status if rec else None, "squareplus::squareplus" in plugtorch.get_registry().ops)
    """
    r = run_python(site, code, PLUGTORCH_PLUGINS_ALLOW="numpy")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "not allowed False"
    r = run_python(site, code, PLUGTORCH_PLUGINS_ALLOW="numpy,plugtorch-squareplus")  # by distribution
    assert r.stdout.strip() == "loaded True", r.stderr
    r = run_python(site, code, PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD="1")
    assert r.stdout.strip() == "None False", r.stderr


def test_the_author_runs_the_conformance_kit_on_their_op(site, tmp_path):
    r = run_conformance(site, tmp_path, "--plugtorch-ops", "plugin:squareplus", "-vv")  # -vv: one line per test
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    passed = [line.split()[0] for line in r.stdout.splitlines() if line.endswith("PASSED")
              or " PASSED " in line]
    # every check, on NumPy (the fused kernel), numpy_bare (the op's function) and arrayapi
    for check in ("test_op_has_samples[squareplus::squareplus]", "test_forward[numpy-", "test_forward[numpy_bare-",
                  "test_forward[arrayapi-", "test_float32[", "test_noncontiguous[", "test_gradcheck[",
                  "test_gradgradcheck["):
        assert any(check in p for p in passed), (check, r.stdout[-3000:])
    assert "FAILED" not in r.stdout and "ERROR" not in r.stdout
