"""`plugtorch train`: tiny runs end to end, metrics JSON, checkpoints, resume equivalence, errors."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import plugtorch
from plugtorch.cli import main
from plugtorch.train import TrainConfig, Trainer, train
from plugtorch.utils.progress import ProgressBar

TINY = dict(limit_train=256, limit_test=128, batch_size=64, download=False, quiet=True)


def _cfg(data_root, **kw):
    return TrainConfig(data_dir=str(data_root), **{**TINY, **kw})


def test_cli_trains_and_writes_metrics(data_root, tmp_path, capsys):
    metrics = tmp_path / "m.json"
    code = main(["train", "--data-dir", str(data_root), "--epochs", "2", "--limit-train", "512",
                 "--limit-test", "200", "--batch-size", "32", "--metrics-json", str(metrics),
                 "--no-download"])
    assert code == 0
    out = capsys.readouterr().out
    assert "epoch 1/2" in out and "epoch 2/2" in out and "final test accuracy" in out
    m = json.loads(metrics.read_text())
    for key in ("test_accuracy", "test_loss", "train_loss", "epochs", "samples_per_second",
                "wall_time_seconds", "backend", "world_size", "seconds_per_epoch",
                "cpu_seconds_per_epoch"):
        assert key in m, key
    assert m["epochs"] == 2 and m["world_size"] == 1 and m["backend"] == "numpy"
    assert m["train_samples"] == 512 and m["test_samples"] == 200
    assert m["test_accuracy"] > 0.5  # 2 epochs on 512 digits is far above chance (0.1)
    assert m["history"][1]["train_loss"] < m["history"][0]["train_loss"]


def test_quiet_prints_only_the_final_line(data_root, capsys):
    assert main(["train", "--data-dir", str(data_root), "--epochs", "1", "--limit-train", "64",
                 "--limit-test", "64", "--quiet", "--no-download"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("final test accuracy")


@pytest.mark.parametrize("model,opt", [("mlp", "sgd"), ("cnn", "adam")])
def test_resumed_run_reaches_the_same_parameters(data_root, tmp_path, monkeypatch, model, opt):
    full = tmp_path / "full.pt"
    part = tmp_path / "part.pt"
    kw = dict(model=model, optimizer=opt, lr_schedule="cosine", lr=0.01 if opt == "sgd" else 1e-3,
              epochs=3)
    m_full = train(_cfg(data_root, checkpoint=str(full), **kw))

    real_save = Trainer.save_checkpoint

    def crash_after_first_epoch(self, epochs_done):
        real_save(self, epochs_done)
        raise KeyboardInterrupt("killed after the first checkpoint")

    monkeypatch.setattr(Trainer, "save_checkpoint", crash_after_first_epoch)
    with pytest.raises(KeyboardInterrupt):
        train(_cfg(data_root, checkpoint=str(part), **kw))
    monkeypatch.undo()
    assert plugtorch.load(part)["epoch"] == 1
    plugtorch.manual_seed(1234)  # the resumed process starts with unrelated RNG state
    m_resumed = train(_cfg(data_root, checkpoint=str(part), resume=True, **kw))

    a, b = plugtorch.load(full), plugtorch.load(part)
    assert a["epoch"] == b["epoch"] == 3
    for name, value in a["model"].items():
        np.testing.assert_array_equal(value.numpy(), b["model"][name].numpy(), err_msg=name)
    assert a["optimizer"]["param_groups"][0]["lr"] == b["optimizer"]["param_groups"][0]["lr"]
    assert m_resumed["test_accuracy"] == m_full["test_accuracy"]
    assert len(m_resumed["history"]) == 3


def test_resume_refuses_a_checkpoint_of_another_setup(data_root, tmp_path, capsys):
    ck = tmp_path / "c.pt"
    train(_cfg(data_root, epochs=1, checkpoint=str(ck), lr_schedule="constant"))
    code = main(["train", "--data-dir", str(data_root), "--model", "cnn", "--checkpoint", str(ck),
                 "--resume", "--limit-train", "64", "--quiet", "--no-download",
                 "--lr-schedule", "constant"])
    assert code == 1
    assert "--model cnn (checkpoint: mlp)" in capsys.readouterr().err
    # A constant learning rate can be extended; a schedule was planned for its epoch count.
    m = train(_cfg(data_root, epochs=2, checkpoint=str(ck), resume=True, lr_schedule="constant"))
    assert [h["epoch"] for h in m["history"]] == [1, 2]
    sched = tmp_path / "s.pt"
    train(_cfg(data_root, epochs=1, checkpoint=str(sched), lr_schedule="cosine"))
    with pytest.raises(ValueError, match="--epochs 2 \\(checkpoint: 1\\)"):
        train(_cfg(data_root, epochs=2, checkpoint=str(sched), lr_schedule="cosine", resume=True))


def test_missing_data_exits_with_instructions(tmp_path, capsys):
    code = main(["train", "--data-dir", str(tmp_path), "--no-download", "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "MNIST files not found" in err and str(tmp_path / "mnist") in err
    assert "Traceback" not in err


def test_python_dash_m_entry_point(data_root, tmp_path):
    env = dict(os.environ, PLUGTORCH_DATA=str(data_root))
    res = subprocess.run([sys.executable, "-m", "plugtorch", "train", "--epochs", "1",
                          "--limit-train", "128", "--limit-test", "64", "--no-download"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "final test accuracy" in res.stdout
    assert "\r" not in res.stderr  # no progress bar when stderr is not a terminal


def test_recipe_defaults_and_unknown_backend(data_root, capsys):
    m = train(_cfg(data_root, model="cnn", batch_size=None, limit_train=64, epochs=None,
                   limit_test=64, quiet=True))
    assert (m["epochs"], m["batch_size"]) == (3, 64)
    assert main(["train", "--backend", "nope", "--data-dir", str(data_root), "--quiet",
                 "--no-download"]) == 1
    assert "unknown backend 'nope'" in capsys.readouterr().err


def test_bad_arguments_are_rejected(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--epochs", "0"])
    assert "must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--optimizer", "lbfgs"])


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_draws_on_a_terminal_only():
    tty, pipe = _Terminal(), io.StringIO()
    for stream in (tty, pipe):
        bar = ProgressBar(2, "epoch 1/1", stream=stream, rate_hz=1e9)
        bar.update(64, 0.5)
        bar.update(64, 0.25)
        bar.close()
    assert "[" in tty.getvalue() and "2/2" in tty.getvalue() and "loss 0.2500" in tty.getvalue()
    assert pipe.getvalue() == ""


def test_example_script_trains(data_root, tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "examples", "mnist_mlp.py")
    res = subprocess.run([sys.executable, script, "--epochs", "1", "--data-dir", str(data_root)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    accuracy = float(res.stdout.split("test accuracy ")[-1].split("%")[0])
    assert accuracy > 90.0  # one epoch of the full training set
    assert set(plugtorch.load(tmp_path / "mnist_mlp.pt")) == {"model", "optimizer"}


def test_two_ranks_reach_the_parameters_of_one_process(data_root, tmp_path):
    import shutil
    launcher = shutil.which("mpirun") or shutil.which("mpiexec")
    if launcher is None:
        pytest.skip("no MPI launcher (mpirun/mpiexec) on PATH: pip install 'plugtorch[mpi]'")
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install 'plugtorch[mpi]'")
    args = ["train", "--model", "mlp", "--epochs", "2", "--batch-size", "64", "--limit-train",
            "512", "--limit-test", "256", "--data-dir", str(data_root), "--no-download", "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run([launcher, "-n", "2", sys.executable, "-m", "plugtorch", *args,
                          "--checkpoint", str(tmp_path / "two.pt"),
                          "--metrics-json", str(tmp_path / "two.json")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("final test accuracy") == 1  # only rank 0 prints
    assert main([*args, "--checkpoint", str(tmp_path / "one.pt")]) == 0
    two, one = plugtorch.load(tmp_path / "two.pt"), plugtorch.load(tmp_path / "one.pt")
    for name, value in one["model"].items():
        np.testing.assert_allclose(two["model"][name].numpy(), value.numpy(), atol=1e-5,
                                   err_msg=name)
    metrics = json.loads((tmp_path / "two.json").read_text())
    assert metrics["world_size"] == 2 and metrics["test_samples"] == 256
