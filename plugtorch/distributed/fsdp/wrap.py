"""torch.distributed.fsdp.wrap: the auto-wrap policies FullyShardedDataParallel takes."""
from ._wrapper import ModuleWrapPolicy

__all__ = ["ModuleWrapPolicy"]
