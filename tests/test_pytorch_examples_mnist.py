"""examples/pytorch_examples_mnist.py, PyTorch-example-style code on plugtorch, trains: its test
accuracy climbs well above chance in a short offline run, in-process and as a script."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "pytorch_examples_mnist.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("pytorch_examples_mnist", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_accuracy_improves_over_a_short_run(data_root, capsys):
    example = _load_example()
    history = example.main(["--epochs", "2", "--limit-train", "384", "--limit-test", "300",
                            "--data-dir", str(data_root), "--no-download", "--log-interval", "3"])
    (loss1, acc1), (loss2, acc2) = history
    assert acc1 > 0.25  # chance is 0.1
    assert acc2 > acc1 + 0.1 and loss2 < loss1
    out = capsys.readouterr().out
    assert "Train Epoch: 2 [192/384 (50%)]" in out
    assert f"Accuracy: {round(acc2 * 300)}/300" in out


def test_runs_as_a_script(data_root, tmp_path):
    env = dict(os.environ, PLUGTORCH_DATA=str(data_root))
    res = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--epochs", "1",
                          "--limit-test", "100", "--no-download", "--save-model"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "Train Epoch: 1 [0/60000 (0%)]" in res.stdout and "Accuracy:" in res.stdout
    assert (tmp_path / "mnist_cnn.pt").is_file()
