"""The core: backend contract, op table, registry, tensor, dispatch and autograd engine."""
