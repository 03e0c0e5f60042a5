"""What a backend declares in ``PLUGTORCH_KERNELS`` (the catalog, docs/ops.md, lists it on every
machine alike) is what it registers where every part of it can run, and names tests that exist."""
from __future__ import annotations

import pathlib

import numpy
import plugtorch_backends.cupy_backend as cupy_backend
import plugtorch_backends.numpy_backend as numpy_backend
import pytest
from plugtorch_backends.cupy_backend import binary_kernels, modules, table
from plugtorch_backends.numpy_backend import native

import plugtorch
from plugtorch.testing.catalog import declared_kernels

REPO = pathlib.Path(__file__).resolve().parents[2]


def _registered(backend: str) -> set[str]:
    reg = plugtorch.get_registry()
    return {op for (op, b) in reg.kernels if b == backend and reg.kernel_is_active(op, b)}


def test_the_catalog_reads_every_loaded_plugins_declaration():
    declared = declared_kernels()
    assert declared["numpy"] == numpy_backend.PLUGTORCH_KERNELS["numpy"]
    assert declared["cupy"] == cupy_backend.PLUGTORCH_KERNELS["cupy"]


def test_numpy_declares_its_c_and_numpy_kernels_built_or_not():
    declared = numpy_backend.PLUGTORCH_KERNELS["numpy"]
    python = numpy_backend.NUMPY_KERNELS.keys()
    assert declared.keys() == numpy_backend.C_KERNEL_OPS | python
    for op, (kinds, _) in declared.items():
        assert kinds[-1] == ("NumPy" if op in python else None), op  # what serves where the C is missing
        assert ("C" in kinds) == (op in numpy_backend.C_KERNEL_OPS), op
    # without the extension only the C kernels may be missing, and only where no NumPy kernel stands in
    assert _registered("numpy") - declared.keys() == set()
    assert declared.keys() - _registered("numpy") <= numpy_backend.C_KERNEL_OPS - python


@pytest.mark.skipif(not native.enabled(), reason=native.status())
def test_the_declared_c_kernels_are_the_ones_the_extension_registers():
    assert set(native.kernels()) == numpy_backend.C_KERNEL_OPS
    assert _registered("numpy") == numpy_backend.PLUGTORCH_KERNELS["numpy"].keys()


def test_cupy_declares_the_kernels_its_probe_registers_without_cupy():
    declared = cupy_backend.PLUGTORCH_KERNELS["cupy"]
    # make_kernels only closes over the loader: the kernels it would register, with no GPU here
    assert declared.keys() == table.make_kernels(numpy, None).keys() | set(binary_kernels.OPS)
    sources = modules.sources()
    for op, (kinds, _) in declared.items():
        stem = kinds[0].removeprefix("CUDA `").removesuffix(".cu`")
        assert stem in sources, (op, kinds)


def test_every_declared_test_exists():
    for backend, ops in declared_kernels().items():
        for op, (_, test) in ops.items():
            assert not test or (REPO / test).is_file(), (backend, op, test)


def test_every_declared_op_takes_kernels():
    ops = plugtorch.get_registry().ops
    for backend, declared in declared_kernels().items():
        for op in declared:
            assert op in ops and not ops[op].kernel_refusal, (backend, op)
