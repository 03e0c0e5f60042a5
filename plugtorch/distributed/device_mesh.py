"""``DeviceMesh``: the world's ranks laid out as an n-dimensional array, one process group per
dimension (torch.distributed.device_mesh).

Every rank builds the same mesh. For each dimension, each line of ranks along it (the other
coordinates fixed) becomes a ``new_group`` in mesh order, so a rank's local rank along a
dimension is its coordinate there; every rank takes part in creating every line's group, as
``new_group`` requires, and keeps the ones it belongs to. ``mesh["dp"]`` is the line through
this rank along ``dp``, reusing the parent's group. ``device_type`` names where the mesh's
tensors live: ``"cpu"`` (the NumPy backend) or ``"cuda"`` (CuPy); the collectives are the
MPI plugin's either way.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import groups as _groups
from .process_group import ProcessGroup

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """A mesh of global ranks with a process group along each dimension.

    ``mesh``: a tensor or nested list of distinct global ranks. ``mesh_dim_names``: one
    unique name per dimension, needed to slice (``mesh["dp"]``, ``mesh["dp", "tp"]``).
    ``backend_override`` is accepted for torch compatibility as None only.
    """

    def __init__(self, device_type: str, mesh: Any, *, mesh_dim_names: tuple[str, ...] | None = None,
                 backend_override: Any = None, _init_backend: bool = True) -> None:
        if backend_override is not None:
            raise ValueError("DeviceMesh: backend_override is not supported by plugtorch (every group uses "
                             "the default group's backend); pass None")
        self._device_type = _check_device_type(device_type)
        ranks = np.array(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if ranks.ndim == 0 or ranks.size == 0:
            raise ValueError(f"DeviceMesh: mesh must be a non-empty array of ranks, got {mesh!r}")
        if len(np.unique(ranks)) != ranks.size:
            raise RuntimeError(f"DeviceMesh cannot have duplicate values, but found {ranks.tolist()}")
        self._ranks = ranks
        self._mesh_dim_names = _check_names(mesh_dim_names, ranks.ndim)
        self._groups: list[Any] = []
        world = _groups.default_group()
        if ranks.size > world.size() or ranks.min() < 0 or ranks.max() >= world.size():
            raise RuntimeError(f"Mesh should not be bigger than default world size {world.size()}, but found "
                               f"{ranks.size} ranks! (mesh {ranks.tolist()})")
        coord = np.argwhere(ranks == world.rank())
        self._coordinate = tuple(int(c) for c in coord[0]) if len(coord) else None
        if _init_backend:
            self._groups = [self._dim_group(d, world) for d in range(ranks.ndim)]

    def _dim_group(self, dim: int, world: ProcessGroup):
        """This rank's group along ``dim`` (every rank creates every line's group, in one order)."""
        lines = np.moveaxis(self._ranks, dim, -1).reshape(-1, self._ranks.shape[dim])
        mine: Any = _groups.GroupMember.NON_GROUP_MEMBER
        for line in lines.tolist():
            if line == list(range(world.size())):
                group: Any = world  # a line over the whole world is the world
            else:
                group = _groups.new_group(line, sort_ranks=False)
            if world.rank() in line:
                mine = group
        return mine

    # -- torch's accessors ------------------------------------------------------------------
    @property
    def device_type(self) -> str:
        return self._device_type

    @property
    def mesh(self):
        """The mesh of global ranks as an int64 tensor (on the CPU)."""
        from ..core.ops.creation import tensor
        return tensor(self._ranks.tolist())

    @property
    def mesh_dim_names(self) -> tuple[str, ...] | None:
        return self._mesh_dim_names

    @property
    def ndim(self) -> int:
        return self._ranks.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._ranks.shape)

    def size(self, mesh_dim: int | None = None) -> int:
        return int(self._ranks.size) if mesh_dim is None else int(self._ranks.shape[mesh_dim])

    def get_rank(self) -> int:
        """This process's global rank."""
        return _groups.default_group().rank()

    def get_coordinate(self) -> tuple[int, ...] | None:
        """This rank's index in every dimension of the mesh; None if the mesh leaves it out."""
        return self._coordinate

    def _dim(self, mesh_dim: int | str | None, fn: str) -> int:
        if mesh_dim is None:
            if self.ndim > 1:
                raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` "
                                   f"needs to be specified when device_mesh.ndim > 1 ({fn}).")
            return 0
        if isinstance(mesh_dim, str):
            return self._get_mesh_dim_by_name(mesh_dim)
        if not isinstance(mesh_dim, int) or not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"DeviceMesh.{fn}: mesh_dim {mesh_dim!r} is out of range for a {self.ndim}-d mesh")
        return mesh_dim % self.ndim

    def _get_mesh_dim_by_name(self, name: str) -> int:
        if not self._mesh_dim_names:
            raise KeyError("No `mesh_dim_names` found.",
                           "To slice the device mesh, please call `init_device_mesh` with `mesh_dim_names`.")
        if name not in self._mesh_dim_names:
            raise KeyError(f"Mesh dimension '{name}' does not exist.",
                           f"Available mesh dimensions are: mesh_dim_names={self._mesh_dim_names}")
        return self._mesh_dim_names.index(name)

    def get_group(self, mesh_dim: int | str | None = None):
        """This rank's process group along ``mesh_dim`` (a name or index; None for a 1-d mesh)."""
        if not self._groups:
            raise RuntimeError("DeviceMesh process groups not initialized!")
        return self._groups[self._dim(mesh_dim, "get_group")]

    def get_all_groups(self) -> list:
        return [self.get_group(d) for d in range(self.ndim)]

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        """This rank's rank within its group along ``mesh_dim`` (its coordinate there)."""
        d = self._dim(mesh_dim, "get_local_rank")
        if self._coordinate is None:
            return -1
        return self._coordinate[d]

    def __getitem__(self, mesh_dim_names: str | tuple[str, ...]) -> DeviceMesh:
        """The sub-mesh through this rank over the named dimensions (in the order given)."""
        if not self._mesh_dim_names:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if names == self._mesh_dim_names:
            return self
        for n in names:
            if n not in self._mesh_dim_names:
                raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names are "
                               f"{self._mesh_dim_names}.")
        if len(set(names)) != len(names):
            raise RuntimeError(f"Slicing overlapping dim_names {names} is not allowed.")
        if self._coordinate is None:
            raise RuntimeError(f"DeviceMesh: rank {self.get_rank()} is not in the mesh {self._ranks.tolist()}, "
                               "so it has no sub-mesh to slice")
        dims = [self._mesh_dim_names.index(n) for n in names]
        index = tuple(slice(None) if d in dims else c for d, c in enumerate(self._coordinate))
        kept = sorted(dims)
        sub_ranks = np.transpose(self._ranks[index], [kept.index(d) for d in dims])
        sub = DeviceMesh(self._device_type, sub_ranks, mesh_dim_names=names, _init_backend=False)
        sub._groups = [self._groups[d] for d in dims] if self._groups else []
        return sub

    def __repr__(self) -> str:
        sizes = (f"({', '.join(f'{k}={v}' for k, v in zip(self._mesh_dim_names, self.shape))})"
                 if self._mesh_dim_names else f"{self.shape}")
        stride = tuple(s // self._ranks.itemsize for s in np.ascontiguousarray(self._ranks).strides)
        return f"DeviceMesh({sizes}, '{self._device_type}', stride={stride})"

    def _key(self) -> tuple:
        return (self._ranks.tolist().__repr__(), self.shape, self._device_type, self._mesh_dim_names)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceMesh) and (self is other or self._key() == other._key())


def _check_device_type(device_type: str) -> str:
    if not isinstance(device_type, str) or not device_type.isalpha():
        raise RuntimeError(f"Device type with index is not supported but got {device_type}. If you maintained a "
                           "'plugtorch.device' object, it's recommended to pass in 'device.type'.")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"DeviceMesh: device_type {device_type!r} is not supported; plugtorch's meshes are on "
                         "'cpu' (NumPy) or 'cuda' (CuPy)")
    return device_type


def _check_names(names, ndim: int) -> tuple[str, ...] | None:
    if names is None:
        return None
    names = tuple(names)
    if len(set(names)) != len(names):
        raise RuntimeError(f"Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names "
                           f"{names}")
    if len(names) != ndim:
        raise RuntimeError(f"mesh_shape and mesh_dim_names should have same length! Found len(mesh_dim_names): "
                           f"{len(names)} and len(mesh_shape):{ndim}.")
    return names


def init_device_mesh(device_type: str, mesh_shape: tuple[int, ...], *,
                     mesh_dim_names: tuple[str, ...] | None = None, backend_override: Any = None) -> DeviceMesh:
    """A mesh of ``mesh_shape`` over global ranks 0, 1, … in row-major order (collective: every
    rank calls it). Initialises the default process group first if needed."""
    mesh_shape = tuple(mesh_shape)
    if mesh_dim_names is not None:
        _check_names(mesh_dim_names, len(mesh_shape))
    _check_device_type(device_type)
    if _groups._world.default_pg is None:
        from . import init
        init()
    n = math.prod(mesh_shape)
    world = _groups.default_group().size()
    if n > world:
        raise RuntimeError(f"Mesh should not be bigger than default world size {world}, but found {n} ranks!")
    if any(not isinstance(s, int) or s <= 0 for s in mesh_shape):
        raise ValueError(f"init_device_mesh: mesh_shape must be positive ints, got {mesh_shape}")
    ranks = np.arange(n, dtype=np.int64).reshape(mesh_shape)
    return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names, backend_override=backend_override)


