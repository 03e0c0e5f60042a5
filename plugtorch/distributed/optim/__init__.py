"""torch.distributed.optim: optimizers that shard their work across ranks."""
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
