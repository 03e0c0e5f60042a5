"""plugtorch.onnx without the onnx package: importing works, export says what to install."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest

import plugtorch


def test_import_plugtorch_does_not_import_onnx():
    code = ("import sys; sys.modules['onnx'] = None; import plugtorch; "
            "print(plugtorch.onnx.TrainingMode.EVAL.name, plugtorch.onnx.is_in_onnx_export())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["EVAL", "False"]


def test_without_the_onnx_package_export_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(ImportError, match=r"pip install plugtorch\[onnx\]"):
        plugtorch.onnx.export(plugtorch.nn.Linear(2, 2), (plugtorch.randn(1, 2),), io.BytesIO())
