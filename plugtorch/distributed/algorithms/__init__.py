"""torch.distributed.algorithms: the join context manager and DDP communication hooks."""
from .join import Join, Joinable, JoinHook

__all__ = ["Join", "Joinable", "JoinHook"]
