"""docs/ops.md is generated from the registry and lists every registered op."""
from __future__ import annotations

import pathlib

import plugtorch
from plugtorch.testing.catalog import markdown

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_the_generated_catalog_lists_every_op_and_primitive():
    text = markdown()
    for name in plugtorch.get_registry().ops:
        assert f"| `{name}` |" in text, name
    assert "| `matmul` |" in text and "Backend primitives" in text


def test_docs_ops_md_is_up_to_date_with_the_core_ops():
    listed = DOC.read_text()
    core = [n for n, op in plugtorch.get_registry().ops.items() if op.plugin == "plugtorch.core"]
    missing = [n for n in core if f"| `{n}` |" not in listed]
    assert not missing, (f"docs/ops.md does not list {missing}; regenerate it with "
                         "`python -m plugtorch.testing.catalog > docs/ops.md`")
