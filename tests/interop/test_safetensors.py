"""safetensors both ways against real PyTorch: the same architecture gives the same outputs."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import plugtorch

from .torch_models import images, plugtorch_model, plugtorch_outputs, torch_twin, train_a_little

pytest.importorskip("safetensors", reason="safetensors is not installed: pip install 'plugtorch[safetensors]'")

MODELS = ["mlp", "cnn", "bn"]


@pytest.mark.parametrize("name", MODELS)
def test_weights_saved_by_torch_load_into_plugtorch(torch, tmp_path, name):
    from safetensors.torch import save_file
    torch.manual_seed(0)
    twin = train_a_little(torch, torch_twin(torch, name))
    path = tmp_path / f"{name}.safetensors"
    save_file(twin.state_dict(), str(path))

    model = plugtorch_model(name)
    result = model.load_state_dict(plugtorch.load_file(path))
    assert not result.missing_keys and not result.unexpected_keys
    x = images()
    with torch.no_grad():
        expected = twin(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(plugtorch_outputs(model, x), expected, rtol=1e-4, atol=1e-5)
    if name == "bn":  # the running statistics came across, not just the weights
        assert model[1].num_batches_tracked.item() == 3
        np.testing.assert_allclose(model[1].running_var.numpy(), twin[1].running_var.numpy())


@pytest.mark.parametrize("name", MODELS)
def test_weights_saved_by_plugtorch_load_into_torch(torch, tmp_path, name):
    from safetensors.torch import load_file
    plugtorch.manual_seed(0)
    model = plugtorch_model(name)
    if name == "bn":  # move the running statistics off their initial values
        model.train()
        for _ in range(2):
            model(plugtorch.randn(8, 1, 28, 28))
    path = tmp_path / f"{name}.safetensors"
    plugtorch.save_file(model.state_dict(), path)

    twin = torch_twin(torch, name)
    twin.load_state_dict(load_file(str(path)))  # strict: every key and shape matches
    twin.eval()
    x = images(2)
    with torch.no_grad():
        expected = twin(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(plugtorch_outputs(model, x), expected, rtol=1e-4, atol=1e-5)


def test_round_trip_keeps_dtypes_shapes_and_values(tmp_path):
    tensors = {"f64": plugtorch.randn(2, 3, dtype=plugtorch.float64),
               "i8": plugtorch.tensor([-1, 2], dtype=plugtorch.int8),
               "mask": plugtorch.tensor([True, False]), "scalar": plugtorch.tensor(3.5),
               "empty": plugtorch.zeros(0, 4), "view": plugtorch.arange(6.).reshape(2, 3).t()}
    path = tmp_path / "t.safetensors"
    plugtorch.save_file(tensors, path, metadata={"note": "hi"})
    back = plugtorch.load_file(path)
    assert set(back) == set(tensors)
    for k, t in tensors.items():
        assert back[k].dtype is t.dtype and back[k].shape == t.shape, k
        np.testing.assert_array_equal(back[k].numpy(), t.numpy())
    back["f64"].add_(1)  # loaded tensors own writable memory
    from safetensors import safe_open
    with safe_open(str(path), framework="np") as f:
        assert f.metadata() == {"note": "hi"}


def test_bfloat16_from_torch_loads_as_bfloat16_and_back(torch, tmp_path):
    from safetensors.torch import load_file, save_file
    w = torch.tensor([1.5, -2.25, 3e-3], dtype=torch.bfloat16)
    save_file({"w": w, "b": torch.ones(2)}, str(tmp_path / "bf.safetensors"))
    out = plugtorch.load_file(tmp_path / "bf.safetensors")
    assert out["w"].dtype is plugtorch.bfloat16
    np.testing.assert_array_equal(out["w"].float().numpy(), w.float().numpy())
    np.testing.assert_array_equal(out["b"].numpy(), [1.0, 1.0])
    plugtorch.save_file(out, tmp_path / "ours.safetensors")
    back = load_file(str(tmp_path / "ours.safetensors"))
    assert back["w"].dtype is torch.bfloat16 and torch.equal(back["w"], w)


def test_non_tensors_are_refused_with_the_name():
    with pytest.raises(TypeError, match="'lr' is a float, not a Tensor"):
        plugtorch.save_file({"w": plugtorch.ones(1), "lr": 0.1}, "unused.safetensors")


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'plugtorch\[safetensors\]'"):
        plugtorch.save_file({"w": plugtorch.ones(1)}, "unused.safetensors")
