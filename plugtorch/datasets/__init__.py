"""Datasets read from disk (or downloaded once): MNIST and Fashion-MNIST in the IDX format."""
from .idx import IDXFormatError, parse_idx, read_idx
from .mnist import MNIST, FashionMNIST
from .store import ChecksumError, DatasetNotFoundError, data_roots

__all__ = ["MNIST", "FashionMNIST", "ChecksumError", "DatasetNotFoundError", "IDXFormatError",
           "data_roots", "parse_idx", "read_idx"]
