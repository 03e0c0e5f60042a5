"""docs/ops.md is exactly what the catalog generator prints, on any machine: it lists every
registered op, and what the backends declare rather than what was built where it ran."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import plugtorch
from plugtorch.testing.catalog import DOC, markdown


def test_the_generated_catalog_lists_every_op_and_primitive():
    text = markdown()
    for name in plugtorch.get_registry().ops:
        assert f"| `{name}` |" in text, name
    assert "| `matmul` |" in text and "Backend primitives" in text


@pytest.mark.parametrize("native_kernels", ["1", "0"], ids=["C kernels", "no C kernels"])
def test_docs_ops_md_is_byte_for_byte_what_the_generator_prints(native_kernels):
    # a fresh interpreter with the repository's own plugins only, the C kernels on and off
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLUGTORCH_PLUGINS", "PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD")}
    env.update(PLUGTORCH_PLUGINS_ALLOW="plugtorch", PLUGTORCH_NATIVE_KERNELS=native_kernels)
    r = subprocess.run([sys.executable, "-m", "plugtorch.testing.catalog"], capture_output=True, text=True,
                       env=env, check=True)
    assert r.stdout == DOC.read_text(), ("docs/ops.md is stale; regenerate it with "
                                         "`python -m plugtorch.testing.catalog > docs/ops.md`")


def test_check_fails_on_a_stale_catalog(tmp_path, monkeypatch):
    from plugtorch.testing import catalog
    stale = tmp_path / "ops.md"
    stale.write_text(markdown().replace("| `abs` |", "| `abs ` |"))
    monkeypatch.setattr(catalog, "DOC", stale)
    assert catalog.main(["--check"]) == 1
    stale.write_text(markdown())
    assert catalog.main(["--check"]) == 0
