"""Fully sharded data parallel: torch's ``fully_shard`` (FSDP2) on plugtorch.distributed.

Each rank keeps 1/world of every parameter, of its gradient and of the optimizer state;
modules gather their full parameters only while they compute. See ``_fully_shard`` for
the order of collectives and docs/distributed.md ("FSDP") for when to use it.
"""
from ._fully_shard import FSDPModule, UnshardHandle, fully_shard
from ._policies import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy
from ._state_dict import full_state_dict, full_tensor, load_full_state_dict
from ._wrapper import BackwardPrefetch, FullyShardedDataParallel, ModuleWrapPolicy, ShardingStrategy

__all__ = ["fully_shard", "FSDPModule", "UnshardHandle", "MixedPrecisionPolicy", "OffloadPolicy",
           "CPUOffloadPolicy", "full_tensor", "full_state_dict", "load_full_state_dict",
           "FullyShardedDataParallel", "ShardingStrategy", "BackwardPrefetch", "ModuleWrapPolicy"]
