"""Exchanging weights and arrays with the rest of the ecosystem.

- :mod:`.safetensors`: ``save_file`` / ``load_file`` in the safetensors format (also as
  ``plugtorch.save_file`` / ``plugtorch.load_file``);
- :mod:`.torch_checkpoint`: PyTorch ``.pt`` files read without running code (used by
  ``plugtorch.load``);
- DLPack lives on the tensor itself (``Tensor.__dlpack__``, ``plugtorch.from_dlpack``).
"""
