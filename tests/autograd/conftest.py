"""Every autograd test runs with both loops of the backward pass (``engine_loop``)."""
import pytest


@pytest.fixture(autouse=True)
def _both_engine_loops(engine_loop):
    return engine_loop
