"""Point-to-point messages: send/recv, isend/irecv, and batches of them (torch's P2POp).

A message is matched by (sender, receiver, group, tag); a receive with ``src=None``
takes the first matching message from any rank, and ``recv`` returns who sent it.
Ranks are global unless given as ``group_dst``/``group_src``.
"""
from ._args import check_tensor
from .groups import get_global_rank, group_rank, resolve
from .process_group import ProcessGroup, Work


def _check_tag(tag, fn: str) -> int:
    if not isinstance(tag, int) or tag < 0:
        raise ValueError(f"{fn}: tag must be a non-negative int, got {tag!r}")
    return tag


def _not_self(pg: ProcessGroup, peer: int, role: str) -> None:
    if pg.rank() == peer:
        raise ValueError(f"Invalid {role} rank: {role} rank should not be the same as the rank of the "
                         "current process.")


def isend(tensor, dst=None, group=None, tag=0, group_dst=None) -> Work | None:
    """Send ``tensor`` to ``dst`` without waiting; the returned work completes once it is sent."""
    check_tensor(tensor, "tensor", "isend")
    pg = resolve(group, "isend")
    if pg is None:
        return None
    peer = group_rank(pg, dst, group_dst, "isend", "dst")
    _not_self(pg, peer, "destination")
    return pg.send(tensor, peer, _check_tag(tag, "isend"))


def irecv(tensor, src=None, group=None, tag=0, group_src=None) -> Work | None:
    """Receive into ``tensor`` from ``src`` (None: any rank) without waiting."""
    check_tensor(tensor, "tensor", "irecv")
    pg = resolve(group, "irecv")
    if pg is None:
        return None
    peer = None
    if src is not None or group_src is not None:
        peer = group_rank(pg, src, group_src, "irecv", "src")
        _not_self(pg, peer, "source")
    return pg.recv(tensor, peer, _check_tag(tag, "irecv"))


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    """Send ``tensor`` to rank ``dst``; returns once the tensor may be changed again."""
    check_tensor(tensor, "tensor", "send")
    pg = resolve(group, "send")
    if pg is None:
        return
    peer = group_rank(pg, dst, group_dst, "send", "dst")
    _not_self(pg, peer, "destination")
    pg.run_waited(pg.send, (tensor, peer, _check_tag(tag, "send")))


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receive into ``tensor`` from ``src`` (None: any rank); returns the sender's global rank
    (-1 on a rank outside ``group``)."""
    check_tensor(tensor, "tensor", "recv")
    pg = resolve(group, "recv")
    if pg is None:
        return -1
    peer = None
    if src is not None or group_src is not None:
        peer = group_rank(pg, src, group_src, "recv", "src")
        _not_self(pg, peer, "source")
    with pg.blocking():  # run_waited's way, keeping the work: it knows the sender
        work = pg.recv(tensor, peer, _check_tag(tag, "recv"))
    work.wait()
    if src is not None:
        return src
    sender = group_src if group_src is not None else work._source_rank()
    return get_global_rank(pg, sender)


class P2POp:
    """One send or receive of a ``batch_isend_irecv``: ``op`` is ``isend`` or ``irecv``."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``plugtorch.distributed.isend`` "
                             "or ``plugtorch.distributed.irecv``.")
        check_tensor(tensor, "tensor", "P2POp")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = (
            op, tensor, peer, group, tag, group_peer)

    def __repr__(self) -> str:
        return (f"P2POp(op={self.op.__name__}, peer={self.peer}, group_peer={self.group_peer}, tag={self.tag}, "
                f"tensor={self.tensor.dtype.name}{list(self.tensor.shape)})")


def batch_isend_irecv(p2p_op_list) -> list:
    """Post every operation of ``p2p_op_list`` (all receives first, so that any order of
    sends and receives across ranks completes), and return their works in the list's order."""
    if not isinstance(p2p_op_list, list) or not p2p_op_list \
            or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``plugtorch.distributed.P2POp``, and the list must not be empty.")
    works: list = [None] * len(p2p_op_list)
    order = sorted(range(len(p2p_op_list)), key=lambda i: p2p_op_list[i].op is not irecv)
    for i in order:
        p = p2p_op_list[i]
        if p.op is isend:
            works[i] = isend(p.tensor, p.peer, p.group, p.tag, p.group_peer)
        else:
            works[i] = irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer)
    return [w for w in works if w is not None]
