"""DataLoader(pin_memory=True) on a machine without an accelerator warns at each new iterator, as
torch 2.13's does (pytorch/examples imagenet passes pin_memory=True on CPU), with torch's words."""
from __future__ import annotations

import warnings

import pytest

import plugtorch


def _messages(lib, **kwargs):
    loader = lib.utils.data.DataLoader(lib.utils.data.TensorDataset(lib.arange(6.0)), batch_size=4, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # two epochs: two iterators
            assert len(list(loader)) == 2
    return [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("kwargs", [{}, {"pin_memory": True}, {"pin_memory": True, "pin_memory_device": "cpu"},
                                    {"pin_memory": False, "pin_memory_device": "cpu"}], ids=str)
def test_pin_memory_warnings_match_torch(torch, kwargs):
    if plugtorch.accelerator.is_available() or torch.accelerator.is_available():
        pytest.skip("an accelerator is present: pinning is then torch's to do, and nothing warns")
    ours, theirs = _messages(plugtorch, **kwargs), _messages(torch, **kwargs)
    assert ours == theirs
    assert len(ours) == 2 * (bool(kwargs.get("pin_memory")) + bool(kwargs.get("pin_memory") and
                                                                    kwargs.get("pin_memory_device")))


def test_the_warning_points_at_the_loop(recwarn):
    loader = plugtorch.utils.data.DataLoader([1, 2, 3], pin_memory=True)
    if plugtorch.accelerator.is_available():
        pytest.skip("an accelerator is present: nothing warns")
    for _ in loader:
        pass
    assert [w.filename for w in recwarn] == [__file__]
