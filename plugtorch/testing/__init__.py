"""plugtorch.testing: the conformance kit that checks every registered op on every backend.

Plugin authors run the same suite on their backend and ops::

    # tests/test_conformance.py in the plugin's repository
    from plugtorch.testing.conformance import *  # noqa: F401,F403

and give their own ops sample inputs through ``OpDef(..., samples=fn)``, where
``fn(g)`` returns a list of :class:`Sample` (see :mod:`plugtorch.testing.sample`).

A device backend also checks that a training step makes no host transfer it was not
asked for, with :func:`count_transfers` (see :mod:`plugtorch.testing.transfers`).
"""
from __future__ import annotations

from .backends import bare_backend, conformance_backends, remove_backend
from .kit import (
    ConformanceError,
    check_coverage,
    check_float32,
    check_forward,
    check_gradcheck,
    check_gradgradcheck,
    check_noncontiguous,
)
from .sample import Sample, SampleGen, Waiver, is_torch, samples_for
from .transfers import TransferCounts, count_transfers

__all__ = ["Sample", "SampleGen", "Waiver", "is_torch", "samples_for", "bare_backend",
           "remove_backend", "conformance_backends", "ConformanceError", "check_coverage",
           "check_forward", "check_float32", "check_gradcheck", "check_gradgradcheck",
           "check_noncontiguous", "count_transfers", "TransferCounts"]
