"""`plugtorch train`: tiny runs end to end, metrics JSON, checkpoints, resume equivalence, errors."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import plugtorch
import plugtorch.apps.train
from plugtorch.apps.cli import main
from plugtorch.apps.train import TrainConfig, Trainer, train
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
    m = train(_cfg(data_root, epochs=2, checkpoint=str(ck), resume=True, lr_schedule="constant"))
    assert [h["epoch"] for h in m["history"]] == [1, 2]
    with pytest.raises(ValueError, match="it has trained 2 epochs already and this run asks for "
                                         "--epochs 1"):
        train(_cfg(data_root, epochs=1, checkpoint=str(ck), resume=True, lr_schedule="constant"))


@pytest.mark.parametrize("schedule", ["cosine", "step"])
def test_resume_extends_a_finished_run(data_root, tmp_path, schedule):
    ck, out = tmp_path / "c.pt", io.StringIO()
    train(_cfg(data_root, epochs=2, checkpoint=str(ck), lr_schedule=schedule, lr=0.01))
    m = train(_cfg(data_root, epochs=4, checkpoint=str(ck), resume=True, lr_schedule=schedule,
                   lr=0.01, quiet=False), out=out)
    assert [h["epoch"] for h in m["history"]] == [1, 2, 3, 4] and m["epochs"] == 4
    assert "extending the run from 2 to 4 epochs" in out.getvalue()
    # epochs 3 and 4 follow the schedule laid out over 4 epochs, as if planned so from the start
    fresh = optim_lrs(schedule, 0.01, 4)
    assert [h["lr"] for h in m["history"][2:]] == pytest.approx(fresh[2:])
    assert plugtorch.load(ck)["epoch"] == 4


def optim_lrs(schedule, lr, epochs):
    from plugtorch.apps.train import build_optimizer, build_scheduler
    opt = build_optimizer("adam", [plugtorch.zeros(1, requires_grad=True)], lr)
    sched = build_scheduler(schedule, opt, epochs)
    lrs = []
    for _ in range(epochs):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def test_missing_data_exits_with_instructions(tmp_path, capsys):
    code = main(["train", "--data-dir", str(tmp_path), "--no-download", "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "MNIST files not found" in err and str(tmp_path / "mnist") in err
    assert "Traceback" not in err
    for name in ("train-images", "train-labels", "t10k-images", "t10k-labels"):  # all at once
        assert f"{name}-idx" in err, name


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
    text = tty.getvalue()
    assert "epoch 1/1 [" in text and "2/2" in text and "loss 0.2500" in text
    assert re.search(r"1/2 \d\d:\d\d<\d\d:\d\d ", text)  # elapsed<ETA, as the step counts
    assert text.endswith("\r")  # the line is cleared at the end
    assert pipe.getvalue() == ""


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"plugtorch {plugtorch.__version__}"


def test_plot_csv_tensorboard_and_export(data_root, tmp_path, torch):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: pip install 'plugtorch[plot]'")
    pytest.importorskip("tensorboard", reason="tensorboard is not installed: pip install 'plugtorch[tensorboard]'")
    pytest.importorskip("safetensors", reason="safetensors is not installed: pip install 'plugtorch[safetensors]'")
    out = tmp_path / "run"
    assert main(["train", "--data-dir", str(data_root), "--no-download", "--quiet", "--epochs", "2",
                 "--limit-train", "256", "--limit-test", "128", "--batch-size", "64",
                 "--log-csv", str(out / "log.csv"), "--plot", str(out / "curves.png"),
                 "--tensorboard", str(out / "tb"), "--export", str(out / "model.safetensors"),
                 "--metrics-json", str(out / "m.json")]) == 0
    metrics = json.loads((out / "m.json").read_text())

    rows = list(csv.DictReader((out / "log.csv").open()))
    assert [r["epoch"] for r in rows] == ["1", "2"]
    for row, h in zip(rows, metrics["history"]):
        for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy", "lr"):
            assert float(row[key]) == pytest.approx(h[key]), key
    assert 0.0 < float(rows[1]["train_accuracy"]) <= 1.0

    from matplotlib.image import imread
    img = imread(out / "curves.png")
    assert img.shape[0] > 300 and img.shape[1] > 800 and img[..., :3].std() > 0.05  # drawn, not blank

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray
    events = EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    events.Reload()
    tags = set(events.Tags()["tensors"])
    assert {"loss/train", "loss/test", "accuracy/train", "accuracy/test", "lr", "loss/train_step"} <= tags
    test_acc = [(e.step, float(make_ndarray(e.tensor_proto))) for e in events.Tensors("accuracy/test")]
    assert test_acc == [(h["epoch"], pytest.approx(h["test_accuracy"])) for h in metrics["history"]]
    assert len(events.Tensors("loss/train_step")) == 8  # 2 epochs of 4 steps

    from interop.torch_models import images, plugtorch_outputs, torch_twin  # tests/interop
    from safetensors.torch import load_file
    twin = torch_twin(torch, "mlp")
    twin.load_state_dict(load_file(str(out / "model.safetensors")))
    model = plugtorch.apps.train.MLP()
    model.load_state_dict(plugtorch.load_file(out / "model.safetensors"))
    x = images()
    with torch.no_grad():
        np.testing.assert_allclose(plugtorch_outputs(model, x), twin.eval()(torch.from_numpy(x)).numpy(),
                                   rtol=1e-4, atol=1e-5)


def test_a_missing_optional_package_stops_the_run_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "tensorboard.summary", None)
    code = main(["train", "--data-dir", str(tmp_path), "--no-download", "--plot", "p.png",
                 "--tensorboard", "tb"])
    err = capsys.readouterr().err
    assert code == 1 and "MNIST files not found" not in err  # refused before reading any data
    assert "--plot needs matplotlib: pip install 'plugtorch[plot]'" in err
    assert "--tensorboard needs tensorboard: pip install 'plugtorch[tensorboard]'" in err


def test_viz_renders_through_dot(tmp_path, capsys):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz): "
                    "rendering an image needs it")
    assert main(["viz", "--model", "cnn", "-o", str(tmp_path / "g.svg")]) == 0
    svg = (tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg")) and svg.rstrip().endswith("</svg>")
    assert "conv1.weight" in svg and "fc2.bias" in svg and svg.count("Backward0") >= 10  # ops drawn
    assert main(["viz", "-o", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_viz_without_dot_writes_the_dot_text(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["viz", "-o", str(tmp_path / "g.svg")]) == 0
    captured = capsys.readouterr()
    assert "'dot' program is not on PATH" in captured.err and "apt-get install graphviz" in captured.err
    assert (tmp_path / "g.dot").read_text().startswith("digraph") and not (tmp_path / "g.svg").exists()
    assert main(["viz", "-o", "-"]) == 0
    assert "fc1.weight" in capsys.readouterr().out


def test_example_script_trains(data_root, tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "examples", "mnist_mlp.py")
    res = subprocess.run([sys.executable, script, "--epochs", "1", "--data-dir", str(data_root),
                          "--out-dir", "out"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    accuracy = float(res.stdout.split("test accuracy ")[-1].split("%")[0])
    assert accuracy > 90.0  # one epoch of the full training set
    assert os.listdir(tmp_path) == ["out"]  # nothing left in the working directory
    assert set(plugtorch.load(tmp_path / "out" / "mnist_mlp.pt")) == {"model", "optimizer"}


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
