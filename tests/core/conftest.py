from __future__ import annotations

import pytest

import plugtorch

from .plugin_helpers import numpy_clone_backend, plugin


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each core test builds its own registry, so plugins it registers never leak into other tests."""
    from plugtorch.core import device, plugins
    monkeypatch.setattr(plugins, "_registry", None)
    monkeypatch.setattr(plugins, "_pm", None)
    monkeypatch.setattr(device, "_global_default", None)
    yield


@pytest.fixture
def second_backend() -> str:
    """A second backend ("numpy2") so cross-backend behaviour can be tested without a GPU."""
    name = "numpy2"
    plugtorch.register_plugin(plugin(lambda r: r.add_backend(numpy_clone_backend(name)),
                                     name="tests.numpy2"))
    return name
