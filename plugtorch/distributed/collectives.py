"""torch.distributed's collectives beyond all_reduce, broadcast and all_gather.

Each checks its arguments as torch does, translates ranks into the group's, and asks the
process group; ``async_op=True`` returns the group's ``Work``. A rank outside ``group``
gets a warning and None, as in torch.
"""
import datetime

from ..core.grad_mode import no_grad
from ._args import check_like, check_list_len, check_tensor, check_tensor_list, reduce_op, run, scaled
from .groups import group_rank, resolve
from .process_group import PremulSum, ReduceOp


def _make_nccl_premul_sum(factor) -> PremulSum:
    """``ReduceOp.PREMUL_SUM`` with ``factor``: every rank's input is multiplied by it, then summed."""
    return PremulSum(factor)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` over the group into rank ``dst``'s ``tensor``."""
    check_tensor(tensor, "tensor", "reduce")
    pg = resolve(group, "reduce")
    if pg is None:
        return None
    root = group_rank(pg, dst, group_dst, "reduce", "dst")
    op, factor = reduce_op(op, tensor.dtype, "reduce")
    if factor is not None:
        if pg.rank() == root:  # the root's tensor is overwritten with the result anyway
            with no_grad():
                tensor.copy_(scaled(tensor, factor))
        else:
            tensor = scaled(tensor, factor)
    return run(pg.reduce, async_op, tensor, root, op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world_size blocks of ``output``'s size) over the group; rank r gets block r."""
    fn = "reduce_scatter_tensor"
    check_tensor(output, "output", fn)
    check_tensor(input, "input", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    check_like(output, input, fn, "output", shape=False)
    if input.numel() != output.numel() * pg.size():
        raise ValueError(f"{fn}: input tensor must be the same size as output size times world size: input "
                         f"has shape {list(input.shape)}, output {list(output.shape)}, world size {pg.size()}")
    op, factor = reduce_op(op, input.dtype, fn)
    if factor is not None:
        input = scaled(input, factor)
    return run(pg.reduce_scatter_tensor, async_op, output, input, op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list`` (one tensor per rank) over the group; rank r gets the reduced ``input_list[r]``."""
    fn = "reduce_scatter"
    check_tensor(output, "output", fn)
    check_tensor_list(input_list, "input_list", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    if len(input_list) != pg.size():
        raise ValueError(f"{fn}: invalid input tensor list size, must be world size: got {len(input_list)} "
                         f"tensors for a group of {pg.size()} ranks")
    for i, t in enumerate(input_list):
        check_like(t, output, fn, f"input_list[{i}]")
    import plugtorch
    with no_grad():
        flat = plugtorch.cat([t.reshape(-1) for t in input_list])
    return reduce_scatter_tensor(output, flat, op, group, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world_size x ``input_tensor``, concatenated or stacked) gets every rank's input."""
    fn = "all_gather_into_tensor"
    check_tensor(output_tensor, "output_tensor", fn)
    check_tensor(input_tensor, "input_tensor", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    check_like(output_tensor, input_tensor, fn, "output_tensor", shape=False)
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError(f"{fn}: output tensor size must be equal to world_size times input tensor size: "
                         f"output has shape {list(output_tensor.shape)}, input {list(input_tensor.shape)}, "
                         f"world size {pg.size()}")
    return run(pg.allgather_into_tensor, async_op, output_tensor, input_tensor)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank r's ``input_tensor_list[j]`` lands in rank j's ``output_tensor_list[r]``."""
    fn = "all_to_all"
    check_tensor_list(output_tensor_list, "output_tensor_list", fn)
    check_tensor_list(input_tensor_list, "input_tensor_list", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    check_list_len(input_tensor_list, pg.size(), "input_tensor_list", fn)
    check_list_len(output_tensor_list, pg.size(), "output_tensor_list", fn)
    ref = input_tensor_list[0]
    for i, t in enumerate(input_tensor_list):
        check_like(t, ref, fn, f"input_tensor_list[{i}]", shape=False)
    for i, t in enumerate(output_tensor_list):
        check_like(t, ref, fn, f"output_tensor_list[{i}]", shape=False)
    return run(pg.alltoall, async_op, output_tensor_list, input_tensor_list)


def _splits(shape: tuple, sizes, n: int, fn: str, name: str) -> list[int]:
    """The rows of dim 0 of a tensor of ``shape`` that go to (come from) each of ``n`` ranks."""
    if not shape:
        raise ValueError(f"{fn}: {name} is 0-d; all_to_all_single splits dimension 0, so pass at least 1-d tensors")
    if sizes is None or len(sizes) == 0:
        if shape[0] % n:
            raise ValueError(f"{fn}: Tensor's dim 0 does not divide equally across group size: {name} has "
                             f"{shape[0]} rows for {n} ranks; pass {name.split('_')[0]}_split_sizes")
        return [shape[0] // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n:
        raise ValueError(f"{fn}: Number of tensor splits not equal to group size: {len(sizes)} split sizes "
                         f"for {n} ranks")
    if sum(sizes) != shape[0] or min(sizes) < 0:
        raise ValueError(f"{fn}: Split sizes doesn't match total dim 0 size: {sizes} for the {shape[0]} "
                         f"rows of {name}")
    return sizes


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Split ``input`` along dim 0 (``input_split_sizes``, default equal) and send block j to rank j;
    ``output`` is the blocks received, in rank order (``output_split_sizes`` rows each)."""
    fn = "all_to_all_single"
    check_tensor(output, "output", fn)
    check_tensor(input, "input", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    check_like(output, input, fn, "output", shape=False)
    n = pg.size()
    out_shape, in_shape = output._data.shape, input._data.shape  # plain tuples: Size's slices cost ~0.2 us
    if output_split_sizes is None and input_split_sizes is None and out_shape == in_shape and in_shape \
            and not in_shape[0] % n:
        # the default, equal blocks both ways: one list serves as both splits. The call is
        # often a few microseconds of Python beside a 50 us exchange, so every step counts.
        splits = [in_shape[0] // n] * n
        return run(pg.alltoall_single, async_op, output, input, splits, splits)
    out_splits = _splits(out_shape, output_split_sizes, n, fn, "output")
    in_splits = _splits(in_shape, input_split_sizes, n, fn, "input")
    if out_shape[1:] != in_shape[1:]:
        raise ValueError(f"{fn}: output {list(out_shape)} and input {list(in_shape)} must agree past dim 0")
    return run(pg.alltoall_single, async_op, output, input, out_splits, in_splits)


def _root_only(pg, root, items, name, role) -> bool:
    """torch's rule for a list only the root passes (gather's, scatter's): required on the root,
    refused elsewhere. Whether this rank is the root."""
    if pg.rank() == root:
        if not items:
            raise ValueError(f"Argument ``{name}`` must be specified on {role} rank.")
        return True
    if items:
        raise ValueError(f"Argument ``{name}`` must NOT be specified on non-{role} ranks.")
    return False


def _check_slots(pg, tensor, items, name, fn) -> None:
    """The root's list holds one tensor per rank, each like ``tensor``."""
    check_list_len(items, pg.size(), name, fn)
    for i, t in enumerate(items):
        check_like(t, tensor, fn, f"{name}[{i}]")


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank ``dst``'s ``gather_list[r]`` gets rank r's ``tensor``."""
    fn = "gather"
    check_tensor(tensor, "tensor", fn)
    if gather_list is not None:
        check_tensor_list(gather_list, "gather_list", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    root = group_rank(pg, dst, group_dst, fn, "dst")
    at_root = _root_only(pg, root, gather_list, "gather_list", "destination")
    if at_root:
        _check_slots(pg, tensor, gather_list, "gather_list", fn)
    return run(pg.gather, async_op, tensor, gather_list if at_root else None, root)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Every rank r's ``tensor`` gets rank ``src``'s ``scatter_list[r]``."""
    fn = "scatter"
    check_tensor(tensor, "tensor", fn)
    if scatter_list is not None:
        check_tensor_list(scatter_list, "scatter_list", fn)
    pg = resolve(group, fn)
    if pg is None:
        return None
    root = group_rank(pg, src, group_src, fn, "src")
    at_root = _root_only(pg, root, scatter_list, "scatter_list", "source")
    if at_root:
        _check_slots(pg, tensor, scatter_list, "scatter_list", fn)
    return run(pg.scatter, async_op, tensor, scatter_list if at_root else None, root)


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    """Rank ``dst``'s ``object_gather_list`` (one slot per rank) gets every rank's picklable ``obj``."""
    pg = resolve(group, "gather_object")
    if pg is None:
        return
    root = group_rank(pg, dst, group_dst, "gather_object", "dst")
    if _root_only(pg, root, object_gather_list, "object_gather_list", "destination") \
            and len(object_gather_list) != pg.size():
        raise ValueError(f"gather_object: object_gather_list has {len(object_gather_list)} slots for a "
                         f"group of {pg.size()} ranks")
    objects = pg.gather_object(obj, root)
    if objects is not None and object_gather_list is not None:
        object_gather_list[:] = objects


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None) -> None:
    """``scatter_object_output_list[0]`` on rank r := rank ``src``'s ``scatter_object_input_list[r]``."""
    fn = "scatter_object_list"
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    pg = resolve(group, fn)
    if pg is None:
        return
    root = group_rank(pg, src, group_src, fn, "src")
    objs = None
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            have = None if scatter_object_input_list is None else len(scatter_object_input_list)
            raise ValueError(f"{fn}: scatter_object_input_list must hold one object per rank ({pg.size()}) on "
                             f"the source rank, got {have}")
        objs = list(scatter_object_input_list)
    scatter_object_output_list[0] = pg.scatter_object(objs, root)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False) -> None:
    """A barrier that fails, on group rank 0, naming the ranks that did not arrive within ``timeout``
    (a ``timedelta``; default the group's timeout); all of them with ``wait_all_ranks=True``,
    else the first. The others raise too, saying rank 0 did not release them."""
    pg = resolve(group, "monitored_barrier")
    if pg is None:
        return
    if timeout is None:
        seconds = float(getattr(pg, "timeout", 1800.0))
    else:
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    pg.monitored_barrier(seconds, bool(wait_all_ranks))
