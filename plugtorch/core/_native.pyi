# The core's C paths (_native.c); native.py loads them and says where they are off.
from collections.abc import Callable
from typing import Any

ABI: int
NODE_FIELDS: tuple[str, ...]
TENSOR_FIELDS: tuple[str, ...]

def configure_types(node: type, accumulate_grad: type, tensor: type, /) -> None: ...
def configure_walk(accumulate: Callable[..., Any], add: Callable[..., Any], fit: Callable[..., Any],
                   check_versions: Callable[..., Any], wrong_count: Callable[..., Any],
                   post_hooks: Callable[..., Any], /) -> None: ...
def wrap(data: Any, backend: Any, requires_grad: bool = ..., /) -> Any: ...
def node(cls: type, op: str, rule: Any, next: tuple, meta: tuple, saved: tuple | None, output: Any,
         attrs: dict, /) -> Any: ...
def drain(ready: list, pending: dict, deps: dict, retain_graph: bool, create_graph: bool,
          step: Callable[[Any, Any], None], /) -> None: ...
