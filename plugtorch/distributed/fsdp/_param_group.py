"""One fully_shard'ed module's parameters: their shards, their all-gather, their reduce-scatter.

Each parameter is split along dim 0 as torch's FSDP2 does (``Shard(0)``): with ``rows`` rows,
rank r keeps rows ``[r * chunk, (r + 1) * chunk)`` (``chunk = ceil(rows / world)``; the last ranks
may hold fewer, or none) as an ``nn.Parameter`` of shape ``(rows_r, *shape[1:])`` — the
*sharded* parameter, which the optimizer steps, and whose optimizer state is therefore this
rank's piece too. For the collectives each piece is flattened and padded with zeros to
``chunk`` rows, so one ``all_gather_into_tensor`` (and one ``reduce_scatter_tensor``) of equal
blocks serves all of a module's parameters: rank r's block is its pieces laid end to end, and
the gathered buffer, read row by row, is each parameter flattened and padded.

The *unsharded* parameter is a second ``nn.Parameter`` per parameter, created once. While
the module computes, it is the module's attribute; when resharded its data is swapped for
an empty tensor, so the full values are freed even though the autograd graph still holds
the parameter object; before backward the data is gathered again into the same object
(the graph's saved tensors see it), as torch frees and refills the storage.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ... import distributed as dist
from ...core.grad_mode import no_grad
from ...core.ops.creation import empty, zeros
from ...core.ops.shape import cat
from ...nn.parameter import Parameter

if TYPE_CHECKING:
    from ...core.tensor import Tensor
    from ...distributed.process_group import ProcessGroup, Work


class FSDPParam:
    """One parameter: where the module holds it, its shape, its piece, its unsharded twin."""

    __slots__ = ("fqn", "fqns", "owners", "shape", "numel", "row", "chunk", "first_row", "rows", "shard_size", "offset",
                 "sharded", "unsharded")

    def __init__(self, fqn: str, owners: list, param: Tensor, rank: int, world: int, offset: int) -> None:
        if param.dim() == 0:
            raise ValueError(f"fully_shard: parameter '{fqn}' is 0-d, so it cannot be split along dim 0; "
                             "pass it in ignored_params, or make it 1-d")
        self.fqn = fqn
        self.owners = [(m, name) for m, name, _ in owners]  # one parameter may be shared
        self.fqns = [key for _, _, key in owners]  # its names, relative to the fully_shard'ed module
        self.shape = tuple(param.shape)
        self.numel = param.numel()
        self.row = self.numel // self.shape[0] if self.shape[0] else 0  # elements per row
        self.chunk = -(-self.shape[0] // world)  # rows per rank, the last ranks' padded
        self.first_row = min(rank * self.chunk, self.shape[0])
        self.rows = min(self.chunk, self.shape[0] - self.first_row)  # this rank's real rows
        self.shard_size = self.chunk * self.row  # elements each rank contributes, padding included
        self.offset = offset  # where this parameter's piece starts in the group's per-rank block
        with no_grad():
            piece = param.detach()[self.first_row:self.first_row + self.rows].clone()
        self.sharded = Parameter(piece, requires_grad=param.requires_grad)
        self.unsharded = Parameter(empty(0, dtype=param.dtype, device=param.device),
                                   requires_grad=param.requires_grad)

    def padded_piece(self, t: Tensor) -> Tensor:
        """``t`` (this rank's rows) flattened and padded with zeros to ``shard_size``."""
        flat = t.reshape(-1)
        pad = self.shard_size - flat.numel()
        return cat([flat, zeros(pad, dtype=t.dtype, device=t.device)], dim=0) if pad else flat

    def take_piece(self, full: Tensor) -> Tensor:
        """This rank's rows of the full tensor ``full``."""
        return full[self.first_row:self.first_row + self.rows]

    def use(self, which: Parameter) -> None:
        for module, name in self.owners:
            module._parameters[name] = which


class FSDPParamGroup:
    """The parameters one ``fully_shard`` call manages, gathered and reduced together."""

    def __init__(self, named: list[tuple[str, list, Tensor]], pg: ProcessGroup) -> None:
        self.pg = pg
        self.world, self.rank = pg.size(), pg.rank()
        self.params: list[FSDPParam] = []
        offset = 0
        for fqn, owners, p in named:
            fp = FSDPParam(fqn, owners, p, self.rank, self.world, offset)
            offset += fp.shard_size
            self.params.append(fp)
        self.block = offset  # elements each rank contributes to the all-gather
        self.expected = sum(1 for fp in self.params if fp.sharded.requires_grad)
        self.unsharded = False
        self.gather: tuple[Work, Tensor, Tensor] | None = None  # (work, output, input) in flight
        self.reduce: tuple[Work, Tensor, Tensor] | None = None
        self.grads_seen: set[int] = set()  # ids of the unsharded parameters whose gradient came
        self.reduce_grads = True
        self.hooks = [fp.unsharded.register_post_accumulate_grad_hook(self._grad_ready)
                      for fp in self.params if fp.unsharded.requires_grad]
        # set by the module's state: what to do after this group's backward
        self.on_grads_ready: Callable[[FSDPParamGroup], None] | None = None
        for fp in self.params:
            fp.use(fp.sharded)

    # -- all-gather --------------------------------------------------------------------
    def start_unshard(self) -> None:
        """Post the all-gather of the full parameters (nonblocking); a no-op if posted or done."""
        if self.unsharded or self.gather is not None or not self.params:
            return
        p0 = self.params[0].sharded
        with no_grad():
            local = cat([fp.padded_piece(fp.sharded.detach()) for fp in self.params], dim=0)
            out = empty(self.block * self.world, dtype=p0.dtype, device=p0.device)
        work = dist.all_gather_into_tensor(out, local, group=self.pg, async_op=True)
        self.gather = (work, out, local)

    def finish_unshard(self) -> None:
        """Wait for the all-gather and make the full parameters the module's."""
        if self.unsharded or not self.params:
            return
        self.start_unshard()
        assert self.gather is not None, "posted just above"
        work, out, _ = self.gather
        work.wait()
        self.gather = None
        with no_grad():
            rows = out.view(self.world, self.block)
            for fp in self.params:
                # a view of the gathered buffer where one parameter fills it (no copy), else a copy
                # (so the buffer is freed once every parameter has its own)
                full = rows[:, fp.offset:fp.offset + fp.shard_size].reshape(-1)[:fp.numel]
                fp.unsharded.data = full.reshape(fp.shape)
                fp.use(fp.unsharded)
        self.unsharded = True

    def reshard(self) -> None:
        """Free the full parameters; the shards become the module's parameters again."""
        if self.gather is not None:  # a prefetch nobody used: complete it before dropping its buffers
            self.gather[0].wait()
            self.gather = None
        if not self.unsharded:
            return
        for fp in self.params:
            fp.unsharded.data = empty(0, dtype=fp.sharded.dtype, device=fp.sharded.device)
            fp.use(fp.sharded)
        self.unsharded = False

    # -- reduce-scatter ----------------------------------------------------------------
    def _grad_ready(self, param: Tensor) -> None:
        self.grads_seen.add(id(param))
        if len(self.grads_seen) == self.expected:
            self.grads_seen = set()
            if self.reduce_grads:
                self.start_reduce()
            self.reshard()
            if self.on_grads_ready is not None:
                self.on_grads_ready(self)

    def missing_grads(self) -> list[str]:
        """The parameters still owing a gradient this backward; forgets the others'."""
        seen, self.grads_seen = self.grads_seen, set()
        return [fp.fqn for fp in self.params if fp.unsharded.requires_grad and id(fp.unsharded) not in seen]

    def start_reduce(self) -> None:
        """Post the reduce-scatter (average) of the full gradients; free them."""
        blocks = []
        trained = [fp for fp in self.params if fp.unsharded.requires_grad]
        with no_grad():
            for fp in self.params:
                g = fp.unsharded.grad
                if g is None:
                    g = zeros(fp.numel, dtype=fp.sharded.dtype, device=fp.sharded.device)
                g = g.reshape(-1)
                pad = fp.shard_size * self.world - fp.numel
                if pad:
                    g = cat([g, zeros(pad, dtype=g.dtype, device=g.device)], dim=0)
                blocks.append(g.view(self.world, fp.shard_size))
            # one parameter's padded gradient is already the layout to scatter: no copy
            flat = blocks[0].reshape(-1) if len(blocks) == 1 else cat(blocks, dim=1).reshape(-1)
            del blocks
            out = empty(self.block, dtype=flat.dtype, device=flat.device)
        for fp in trained:
            fp.unsharded.grad = None
        work = dist.reduce_scatter_tensor(out, flat, op=dist.ReduceOp.AVG, group=self.pg, async_op=True)
        self.reduce = (work, out, flat)

    def finish_reduce(self) -> None:
        """Wait for the reduce-scatter; each shard's ``.grad`` gets (or adds) its block."""
        if self.reduce is None:
            return
        work, out, _ = self.reduce
        work.wait()
        self.reduce = None
        with no_grad():
            for fp in self.params:
                if not fp.sharded.requires_grad:
                    continue
                # views of out (no copies): each piece's real rows
                g = out[fp.offset:fp.offset + fp.rows * fp.row].view(fp.sharded.shape)
                fp.sharded.grad = g if fp.sharded.grad is None else fp.sharded.grad + g
