# The _special extension (special.c): torch.special's functions over float64 buffers.
from typing import Any

FUNCTIONS: str

def apply(name: str, x: Any, y: Any, n: int, out: Any, /) -> None: ...
