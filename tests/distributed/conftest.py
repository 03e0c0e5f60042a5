"""Fixtures shared by the distributed tests."""
from __future__ import annotations

import numpy as np
import pytest
from mpi_harness import launch


@pytest.fixture(scope="session")
def single_process_params(tmp_path_factory):
    """The parameters ``mpi_scripts/train_mlp.py`` ends with on one process (no launcher)."""
    out = tmp_path_factory.mktemp("equivalence") / "n1.npz"
    result = launch(0, "train_mlp.py", out)
    assert result.returncode == 0, result.stderr
    return dict(np.load(out))
