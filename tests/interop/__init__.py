"""Interop tests: safetensors, PyTorch checkpoints, DLPack, NumPy."""
