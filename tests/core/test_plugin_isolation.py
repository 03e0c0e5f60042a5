"""Installed plugins that fail are isolated and reported; PLUGTORCH_PLUGINS_ALLOW chooses which load;
``plugtorch plugins`` shows what serves each op.

Each test installs small packages the way pip would leave them (a ``.dist-info`` with an
``entry_points.txt`` beside the modules) in a temporary directory on ``PYTHONPATH``,
and runs plugtorch in a fresh process, as a user's session would.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_GOOD = '''
import numpy as np
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
from plugtorch.core.registry import OpDef
PLUGTORCH_CONTRACT = CONTRACT_VERSION

@hookimpl
def plugtorch_register(registrar):
    registrar.add_op(OpDef("good_twice", decompose=lambda x: x * 2))
    registrar.add_kernel("softplus", "numpy", lambda x, *, beta, threshold: np.log1p(np.exp(x)))
'''

_IMPORT_FAILS = '''
raise ImportError("this plugin needs libfoo.so, which is not installed")
'''

_HOOK_FAILS = '''
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
from plugtorch.core.registry import OpDef
PLUGTORCH_CONTRACT = CONTRACT_VERSION

@hookimpl
def plugtorch_register(registrar):
    registrar.add_op(OpDef("half_registered", decompose=lambda x: x))  # rolled back below
    raise RuntimeError("bug in the plugin's hook")
'''


def _install(root, dist, module, source, version="1.2.3"):
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"  # as pip names it
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[plugtorch]\n{dist} = {module}\n")


def _run(root, code, **env):
    full = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=120)


@pytest.fixture
def site(tmp_path):
    _install(tmp_path, "good-plugin", "good_plugin_mod", _GOOD)
    _install(tmp_path, "broken-import", "broken_import_mod", _IMPORT_FAILS)
    _install(tmp_path, "broken-hook", "broken_hook_mod", _HOOK_FAILS)
    return tmp_path


def test_failing_plugins_are_reported_and_do_not_take_plugtorch_or_the_others_down(site):
    r = _run(site, """
        import warnings
        warnings.simplefilter("always")
        import plugtorch
        x = plugtorch.ones(2)                         # the registry loads here
        print("TWICE", plugtorch.get_registry().ops["good_twice"].plugin)
        print("HALF", "half_registered" in plugtorch.get_registry().ops)
        for name, rec in plugtorch.core.plugins.plugin_records().items():
            print("REC", name, rec.status, rec.distribution, rec.version)
    """)
    assert r.returncode == 0, r.stderr
    assert "TWICE good-plugin" in r.stdout
    assert "HALF False" in r.stdout  # the failed hook's partial registration was rolled back
    assert "REC broken-import failed broken-import 1.2.3" in r.stdout
    assert "REC broken-hook failed broken-hook 1.2.3" in r.stdout
    assert "REC good-plugin loaded good-plugin 1.2.3" in r.stdout
    # one warning names both failures and says where to look
    warning = [line for line in r.stderr.splitlines() if "failed to load" in line]
    assert len(warning) == 1 and "broken-import" in warning[0] and "broken-hook" in warning[0]
    assert "plugtorch plugins" in warning[0]


def test_the_cli_shows_tracebacks_packages_and_what_serves_each_op(site):
    r = _run(site, "import sys; from plugtorch.apps.cli import main; sys.exit(main(['plugins']))")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "libfoo.so, which is not installed" in out and "bug in the plugin's hook" in out
    assert "good-plugin" in out and "entry point 'good-plugin = good_plugin_mod'" in out and "1.2.3" in out
    r = _run(site, "import sys; from plugtorch.apps.cli import main; sys.exit(main(['plugins', '--json', "
                   "'--op', 'softplus']))")
    report = json.loads(r.stdout)
    assert list(report["ops"]) == ["softplus"]
    assert report["ops"]["softplus"]["backends"]["numpy"]["served_by"] == "kernel from good-plugin"
    failed = {p["name"]: p for p in report["plugins"] if p["status"] == "failed"}
    assert set(failed) == {"broken-import", "broken-hook"} and "Traceback" in failed["broken-hook"]["error"]
    r = _run(site, "import sys; from plugtorch.apps.cli import main; sys.exit(main(['plugins', '--op', 'nope']))")
    assert r.returncode == 2 and "no op named 'nope'" in r.stdout


def test_the_allow_list_loads_only_the_named_plugins(site):
    r = _run(site, """
        import plugtorch
        plugtorch.ones(1)
        recs = plugtorch.core.plugins.plugin_records()
        print(sorted((n, r.status) for n, r in recs.items() if n != "plugtorch.core"))
    """, PLUGTORCH_PLUGINS_ALLOW="numpy,good-plugin")
    assert r.returncode == 0, r.stderr
    assert "('good-plugin', 'loaded')" in r.stdout and "('numpy', 'loaded')" in r.stdout
    assert "('broken-import', 'not allowed')" in r.stdout and "('mpi', 'not allowed')" in r.stdout
    assert "failed to load" not in r.stderr  # not imported at all


def test_a_plugin_named_explicitly_still_fails_loudly(site):
    r = _run(site, "import plugtorch; plugtorch.ones(1)", PLUGTORCH_PLUGINS="broken_hook_mod",
             PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD="1")
    assert r.returncode != 0 and "bug in the plugin's hook" in r.stderr


def test_using_plugtorch_while_being_imported_is_a_clear_error(tmp_path):
    _install(tmp_path, "eager-plugin", "eager_plugin_mod", """
        import plugtorch
        PLUGTORCH_CONTRACT = 1
        plugtorch.zeros(1)   # too early: the registry is still being built
    """)
    r = _run(tmp_path, "import warnings; warnings.simplefilter('always'); import plugtorch; "
                       "print(plugtorch.ones(1).tolist())")
    assert r.returncode == 0, r.stderr
    assert "[1.0]" in r.stdout and "while it was being imported" in r.stderr
