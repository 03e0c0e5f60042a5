"""Datasets, samplers and the DataLoader, with ``torch.utils.data``'s names and behaviour."""
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .distributed import DistributedSampler
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler
from .workers import WorkerInfo, get_worker_info

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "Subset",
           "SubsetRandomSampler", "TensorDataset", "WorkerInfo", "default_collate",
           "default_convert", "get_worker_info", "random_split"]
