"""Argument checks shared by the collectives, with torch.distributed's errors."""
from ..core.grad_mode import no_grad
from ..core.tensor import Tensor
from .process_group import BITWISE_OPS, PremulSum, ReduceOp


def check_tensor(t, name: str, fn: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: Invalid function argument. Expected parameter `{name}` of type "
                        f"plugtorch.Tensor but got {type(t)} instead.")


def check_tensor_list(ts, name: str, fn: str) -> None:
    if not isinstance(ts, list) or not all(isinstance(t, Tensor) for t in ts):
        kinds = [type(t) for t in ts] if isinstance(ts, list) else type(ts)
        raise TypeError(f"{fn}: Invalid function argument. Expected parameter `{name}` of type "
                        f"List[plugtorch.Tensor] but got {kinds} instead.")


def check_like(t, ref, fn: str, what: str, shape: bool = True) -> None:
    """``t`` must have ``ref``'s dtype, device (and shape)."""
    if t.dtype is not ref.dtype:
        raise ValueError(f"{fn}: Invalid usage of tensors with different dtypes. Found {t.dtype.name} and "
                         f"{ref.dtype.name} ({what}); pass tensors of one dtype")
    backend = t._backend  # one single-device backend: one device, without building Devices (~0.4 us each)
    if not (backend is ref._backend and backend.device_index is None) and not _same_device(t.device, ref.device):
        raise ValueError(f"{fn}: {what} is on {t.device} but the input is on {ref.device}; "
                         "pass tensors on one device")
    if shape and t.shape != ref.shape:
        raise ValueError(f"{fn}: invalid tensor size: {what} is {t.dtype.name}{list(t.shape)}, expected "
                         f"{ref.dtype.name}{list(ref.shape)}; they must match")


def _same_device(a, b) -> bool:
    # equal fields settle it without Device.__eq__'s alias lookup (~2 us a call, per collective)
    return (a.type == b.type and a.index == b.index) or a == b


def check_list_len(ts: list, size: int, name: str, fn: str) -> None:
    if len(ts) != size:
        raise ValueError(f"{fn}: {name} has {len(ts)} tensors, but the group has {size} ranks; "
                         "pass one tensor per rank")


_SUM = ReduceOp.SUM  # an Enum member looked up on its class costs ~0.1 us (3.11)


def reduce_op(op, dtype, fn: str):
    """(the ReduceOp the process group runs, the PREMUL_SUM factor or None)."""
    if op is _SUM:  # every dtype sums; the common case skips the checks below
        return op, None
    if isinstance(op, PremulSum):
        if not dtype.is_floating_point:
            raise TypeError(f"{fn}: ReduceOp.PREMUL_SUM scales floating-point tensors, got {dtype.name}")
        return ReduceOp.SUM, op.factor
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{fn}: op must be a plugtorch.distributed.ReduceOp, got {op!r}")
    if op is ReduceOp.PREMUL_SUM:
        raise ValueError(f"{fn}: ReduceOp.PREMUL_SUM needs its factor: pass "
                         "plugtorch.distributed._make_nccl_premul_sum(factor)")
    if op in BITWISE_OPS and (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{fn}: Cannot use ReduceOp.{op.name} with non-integral dtype ({dtype.name})")
    if op is ReduceOp.AVG and not dtype.is_floating_point:
        raise TypeError(f"{fn}: ReduceOp.AVG needs a floating-point tensor, got {dtype.name}; "
                        "use ReduceOp.SUM and divide")
    return op, None


def scaled(t, factor):
    """``t * factor`` in ``t``'s dtype, outside autograd (PREMUL_SUM's input)."""
    with no_grad():
        if isinstance(factor, Tensor):
            factor = factor.reshape(()).to(t.device)
        return (t * factor).to(t.dtype)


def run(collective, async_op: bool, *args):
    """``collective(*args)``, a method of a process group: its ``Work`` if ``async_op``, else
    waited on (None) through the group's ``run_waited``, so the provider may skip what only
    helps work that travels while its caller computes."""
    if async_op:
        return collective(*args)
    collective.__self__.run_waited(collective, args)
    return None

