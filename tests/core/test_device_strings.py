"""``plugtorch.device`` parses and checks what it is given as torch's does: the same devices from
good input and the same errors from bad input (an unknown type, a malformed string, a negative or
non-int index), instead of a device object naming something no backend is."""
from __future__ import annotations

import pytest

import plugtorch

GOOD = [("cpu",), ("cpu:0",), ("cuda:1",), ("cpu", 0), ("cuda", 2), ("meta",), ("mps",), ("cpu", None)]
BAD = [(None,), ("foo",), ("cpu:x",), (" cpu",), ("CPU",), ("cuda:-1",), ("",), ("cuda", -1), ("cpu", 1.5),
       ("cpu", "0"), ("cpu:0", 1), ("cuda:01",), ("cuda:1 ",), (True,), (":0",)]


def _outcome(lib, args):
    try:
        d = lib.device(*args)
    except Exception as e:  # the type and message are what is compared
        return type(e).__name__, str(e).split(" - got")[0].split(" device type at")[0][:60]
    return d.type, d.index


@pytest.mark.parametrize("args", GOOD + BAD, ids=repr)
def test_device_matches_torch(torch, args):
    assert _outcome(plugtorch, args) == _outcome(torch, args)


def test_an_int_names_the_accelerator_and_backend_names_are_devices(torch):
    if not plugtorch.accelerator.is_available():
        assert _outcome(plugtorch, (3,)) == _outcome(torch, (3,)) == (
            "RuntimeError", "Cannot access accelerator device when none is available.")
    assert plugtorch.device("numpy:0") == plugtorch.device("cpu", 0)
    assert plugtorch.device(plugtorch.device("cpu", 1)).index == 1
    with pytest.raises(RuntimeError, match="Expected one of cpu, .*numpy.* device type at start of device string: "
                                           "nump$"):
        plugtorch.device("nump")
