"""Data parallelism over plugtorch.distributed: ``DistributedDataParallel``."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
