"""Process groups: the default one, ``new_group``/``new_subgroups``, and rank translation.

As in torch, ranks passed to collectives (``src``, ``dst``) are *global* ranks (ranks of
the default group) and ``group_src``/``group_dst`` are ranks within ``group``; a process
group itself works in group ranks. ``new_group`` is called by every rank of the default
group; the ranks left out get ``GroupMember.NON_GROUP_MEMBER``, and a collective they call
on it is a no-op with a warning (torch's behaviour).
"""
import warnings

from .process_group import ProcessGroup

NON_GROUP_MEMBER = -100


class _State:
    def __init__(self) -> None:
        self.default_pg: ProcessGroup | None = None
        self.subgroups: list[ProcessGroup] = []  # made by new_group, shut down with the default one


_world = _State()


class _WorldMeta(type):
    @property
    def WORLD(cls) -> ProcessGroup | None:
        """The default process group (None before ``init_process_group``)."""
        return _world.default_pg


class GroupMember(metaclass=_WorldMeta):
    """``GroupMember.WORLD``: the default group; ``NON_GROUP_MEMBER``: what ``new_group``
    returns on ranks it leaves out."""

    NON_GROUP_MEMBER = NON_GROUP_MEMBER


class group(metaclass=_WorldMeta):  # torch names it so
    """``group.WORLD``: the default process group."""


def default_group() -> ProcessGroup:
    if _world.default_pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call plugtorch.distributed.init() (or init_process_group()) first")
    return _world.default_pg


def _is_non_member(g) -> bool:
    return isinstance(g, int) and not isinstance(g, bool) and g == NON_GROUP_MEMBER


def resolve(g, fn: str) -> ProcessGroup | None:
    """The process group ``g`` names (None: the default), or None, with torch's warning, on a
    rank that is not in it."""
    if g is None:
        return default_group()
    if _is_non_member(g):
        pg = _world.default_pg
        warnings.warn(f"Running {fn} on global rank {-1 if pg is None else pg.rank()} which does not "
                      "belong to the given group.", stacklevel=3)
        return None
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"{fn}: group must be a ProcessGroup (from new_group) or None, got {type(g).__name__}")
    return g


def ranks_of(pg: ProcessGroup) -> list[int]:
    return list(pg.global_ranks) if pg.global_ranks is not None else list(range(pg.size()))


def _registered(g, fn: str) -> ProcessGroup:
    if g is None or _is_non_member(g) or not isinstance(g, ProcessGroup):
        raise ValueError(f"{fn}: Group {g!r} is not registered, please create group with "
                         "plugtorch.distributed.new_group API")
    return g


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    """The global ranks of ``group`` (None: the default group), ordered by group rank."""
    return ranks_of(default_group() if group is None else _registered(group, "get_process_group_ranks"))


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """``global_rank``'s rank within ``group`` (a ValueError if it is not in it)."""
    if group is not None and group is _world.default_pg:
        return global_rank
    ranks = ranks_of(_registered(group, "get_group_rank"))
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return ranks.index(global_rank)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The global rank of ``group``'s rank ``group_rank``."""
    if group is not None and group is _world.default_pg:
        return group_rank
    ranks = ranks_of(_registered(group, "get_global_rank"))
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return ranks[group_rank]


def group_rank(pg: ProcessGroup, global_rank: int | None, rank_in_group: int | None, fn: str,
               role: str) -> int:
    """The group rank a collective's ``src``/``dst`` (global) or ``group_src``/``group_dst`` names."""
    if rank_in_group is not None:
        if global_rank is not None:
            raise ValueError(f"{fn}: Can't specify both {role} and group_{role}")
        r = rank_in_group
    elif global_rank is None:
        raise ValueError(f"{fn}: Must specify {role} or group_{role}")
    elif pg.global_ranks is None and type(global_rank) is int and 0 <= global_rank < pg.size():
        return global_rank  # the world's group, whose ranks are the global ones: no list to build
    else:
        ranks = ranks_of(pg)
        if global_rank not in ranks:
            raise ValueError(f"{fn}: {role}={global_rank} is not a rank of this group (its global ranks are "
                             f"{ranks})")
        r = ranks.index(global_rank)
    if not isinstance(r, int) or not 0 <= r < pg.size():
        raise ValueError(f"{fn}: group_{role}={r} is not a rank of this group (size {pg.size()})")
    return r


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None, sort_ranks=True):
    """A process group of these global ranks (all of them when None or empty).

    Every rank of the default group calls it, members or not (with
    ``use_local_synchronization=True``, only the members do). Non-members get
    ``GroupMember.NON_GROUP_MEMBER``. Group ranks follow ``sorted(ranks)`` unless
    ``sort_ranks=False``. ``timeout`` bounds the new group's collectives (default: the
    default group's); ``pg_options``, ``group_desc`` and ``device_id`` are accepted for
    torch compatibility.
    """
    world = default_group()
    if backend is not None and str(backend).lower() != world.backend_name:
        raise ValueError(f"new_group: backend={backend!r}, but the default group's backend is "
                         f"{world.backend_name!r}; groups are made with the same backend (pass None)")
    n = world.size()
    ranks = list(range(n)) if not ranks else list(ranks)
    if len(ranks) > n:
        raise ValueError("the new group's world size should be less or equal to the world size set by "
                         "init_process_group")
    for r in ranks:
        if not isinstance(r, int) or not 0 <= r < n:
            raise ValueError(f"new_group: rank {r!r} is not a rank of the default group (world size {n})")
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: ranks {ranks} name a rank twice")
    if sort_ranks:
        ranks = sorted(ranks)
    if use_local_synchronization and world.rank() not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    from . import _timeout_seconds
    seconds = _timeout_seconds(timeout) if timeout is not None else None
    sub = world.new_group(ranks, timeout=seconds, local=use_local_synchronization)
    if sub is None:
        return GroupMember.NON_GROUP_MEMBER
    _world.subgroups.append(sub)
    return sub


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Split ``group`` (default: the default group) into consecutive groups of ``group_size``
    ranks; returns (this rank's subgroup, all of them)."""
    if group_size is None:
        raise ValueError("Default group size only takes effect when CUDA is available."
                         "If your subgroup using a backend that does not depend on CUDA,"
                         "please pass in 'group_size' correctly.")
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    ranks = get_process_group_ranks(group)
    if len(ranks) < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({len(ranks)})")
    if len(ranks) % group_size != 0:
        raise ValueError(f"The world size ({len(ranks)}) must be divisible by 'group_size={group_size}'")
    me = default_group().rank()
    mine, subgroups = None, []
    for i in range(0, len(ranks), group_size):
        chunk = ranks[i:i + group_size]
        sub = new_group(chunk, timeout=timeout, backend=backend)
        subgroups.append(sub)
        if me in chunk:
            mine = sub
    return mine, subgroups


def destroy(g) -> None:
    """Shut ``g`` down (None or the default group: every group, the default last)."""
    if _is_non_member(g):
        return
    if g is None or g is _world.default_pg:
        for sub in _world.subgroups:
            sub.shutdown()
        _world.subgroups = []
        if _world.default_pg is not None:
            _world.default_pg.shutdown()
        _world.default_pg = None
        return
    if g in _world.subgroups:
        _world.subgroups.remove(g)
    g.shutdown()
