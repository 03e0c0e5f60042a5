"""DeviceMesh / init_device_mesh: a 2x2 mesh on 4 ranks under mpiexec (groups, slicing, an
all_reduce along each dimension, DDP on each "dp" group), and the checks a single process can do."""
from __future__ import annotations

import pytest
from mpi_harness import _env, check, launch, needs_mpi

import plugtorch
import plugtorch.distributed as dist
from plugtorch.distributed.device_mesh import DeviceMesh, init_device_mesh


@needs_mpi
def test_2x2_mesh_groups_slices_and_ddp_per_dp_group():
    check(launch(4, "device_mesh_2x2.py", timeout=90), 4)


@needs_mpi
def test_2x2_mesh_on_cuda():
    if not plugtorch.cuda.is_available():
        pytest.skip("device_type='cuda' needs CuPy and a GPU; none here")
    check(launch(4, "device_mesh_2x2.py", timeout=120, env=_env(MESH_DEVICE="cuda")), 4)


@pytest.fixture
def world():
    dist.init()
    yield
    dist.destroy_process_group()


def test_one_rank_mesh(world):
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
    assert mesh.get_group() is dist.group.WORLD  # a line over the whole world is the world
    assert (mesh.get_coordinate(), mesh.get_local_rank(), mesh.size(), mesh.ndim) == ((0,), 0, 1, 1)
    assert mesh["dp"] is mesh
    assert repr(mesh) == "DeviceMesh((dp=1), 'cpu', stride=(1,))"
    assert plugtorch.distributed.init_device_mesh is init_device_mesh and dist.DeviceMesh is DeviceMesh


def test_bad_meshes_raise_as_torch(world):
    with pytest.raises(RuntimeError, match="Mesh should not be bigger than default world size 1, but found 2"):
        init_device_mesh("cpu", (2,))
    with pytest.raises(RuntimeError, match="Each mesh_dim_name must be unique"):
        init_device_mesh("cpu", (1, 1), mesh_dim_names=("a", "a"))
    with pytest.raises(RuntimeError, match="mesh_shape and mesh_dim_names should have same length"):
        init_device_mesh("cpu", (1,), mesh_dim_names=("a", "b"))
    with pytest.raises(RuntimeError, match="Device type with index is not supported"):
        init_device_mesh("cuda:0", (1,))
    with pytest.raises(RuntimeError, match="Cannot slice a DeviceMesh without mesh_dim_names"):
        DeviceMesh("cpu", [0])["dp"]
    with pytest.raises(KeyError, match="Invalid mesh_dim_names"):
        DeviceMesh("cpu", [0], mesh_dim_names=("dp",))["tp"]
    with pytest.raises(RuntimeError, match="Optional kwarg `mesh_dim` needs to be specified"):
        DeviceMesh("cpu", [[0]]).get_group()
