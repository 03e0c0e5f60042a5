"""Every collective and point-to-point op, on groups, under mpiexec on 2, 3 and 4 ranks.

One job per world size runs ``mpi_scripts/all_ops.py`` (all ops against NumPy, async,
groups and non-members, empty/0-d/non-contiguous tensors, error cases); 3 ranks catch
power-of-two assumptions. A failed check on any rank aborts the job.
"""
from __future__ import annotations

import pytest
from mpi_harness import _env, check, launch, needs_mpi


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_every_op_matches_numpy(nprocs):
    check(launch(nprocs, "all_ops.py", timeout=90), nprocs)


@needs_mpi
def test_every_op_in_debug_mode():
    """The fingerprint check wraps the new collectives and subgroups without changing results."""
    check(launch(3, "all_ops.py", timeout=90, env=_env(PLUGTORCH_DISTRIBUTED_DEBUG="1")), 3)


@needs_mpi
def test_every_op_with_device_tensors_staged_through_host_memory():
    """The CuPy backend's code path on the CPU (``cupy_emulated``): arrays that are not host
    memory to MPI, so every op stages them, as with a CuPy backend and an MPI that is not
    CUDA-aware."""
    from plugtorch_backends.cupy_backend.probe import installed

    from plugtorch.testing.cuda_cpu import compiler_missing
    if not installed():
        pytest.skip("CuPy is not installed; the emulated backend checks its calls against CuPy's API")
    if compiler_missing():
        pytest.skip(f"the emulated backend's kernels cannot run on the CPU: {compiler_missing()}")
    env = _env(OPS_DEVICE="cupy_emulated", PLUGTORCH_PLUGINS="plugtorch_backends.cupy_backend.emulation")
    check(launch(3, "all_ops.py", timeout=120, env=env), 3)


@needs_mpi
@pytest.mark.parametrize("op, what", [("reduce_scatter", "reduce_scatter(SUM, float32[4])"),
                                      ("recv", "recv(float32[3], src=1, tag=0)")])
def test_the_watchdog_covers_new_ops_on_subgroups(op, what):
    result = launch(2, "stall_ops.py", op, timeout=40)
    assert result.returncode != 0
    assert f"{what} did not complete within 2 s" in result.stderr, result.stderr
    assert "Ranks that did not arrive: [1]" in result.stderr
    assert "was not stopped" not in result.stdout


@needs_mpi
def test_byte_moving_ops_carry_every_dtype():
    """all_gather_into_tensor, gather, scatter, send/recv and all_to_all_single hand MPI byte
    specs: bfloat16, bool, complex and int8 arrive bit for bit on 3 ranks."""
    check(launch(3, "byte_dtypes.py", timeout=60), 3)
