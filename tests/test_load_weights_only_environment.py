"""plugtorch.load honours torch's TORCH_FORCE_WEIGHTS_ONLY_LOAD / TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD,
as torch.load does: the same file loads, warns or is refused under each setting, with torch's messages."""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import plugtorch


def _outcome(load, path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = load(path, **kw)
        except pickle.UnpicklingError:  # plugtorch's UnsafeCheckpointError is one
            return "refused", "", [str(w.message) for w in caught]
        except Exception as e:
            return type(e).__name__, str(e).split("\n")[0][:60], [str(w.message) for w in caught]
    return "loaded", repr(got.tolist()), [str(w.message) for w in caught]


@pytest.mark.parametrize("env,kw,expected", [
    ({}, {}, "refused"),
    ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, {}, "loaded"),
    ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "true"}, {"weights_only": True}, "refused"),  # the call said
    ({"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "yes"}, {"weights_only": False}, "refused"),  # forced over the call
    ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "0"}, {"weights_only": False}, "loaded"),
    ({"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, {}, "RuntimeError"),
], ids=str)
def test_environment_overrides_match_torch(torch, tmp_path, monkeypatch, env, kw, expected):
    path = tmp_path / "array.pt"
    plugtorch.save(np.arange(6.0).reshape(2, 3), path)  # a NumPy array: not weights-only loadable
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ours, theirs = _outcome(plugtorch.load, path, **kw), _outcome(torch.load, path, **kw)
    assert ours[0] == theirs[0]
    assert ours[0] == expected
    if ours[0] == "loaded":
        assert ours[1] == theirs[1] == repr([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    elif ours[0] == "RuntimeError":
        assert ours[1] == theirs[1]
    assert ours[2] == theirs[2]
