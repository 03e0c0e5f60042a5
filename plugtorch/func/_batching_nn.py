"""Batching rules of linear algebra, layers and losses (the rest are in ``_batching.py``).

Each folds the vmap batch into what the op already batches over where it can: one more
leading dim of a product, the N dim of a convolution, pooling or normalisation, the groups of
a grouped convolution when each example has its own weight.
"""
from __future__ import annotations

from collections.abc import Callable

from ..core.dispatch import call_op
from ._batching import RULES, _align, _batch, _loop_rule, _rank, _rule, _size

# -- linear algebra and layers -------------------------------------------------------------

def _matmul(a, ba, b, bb):
    """``a @ b`` of each example, for every pairing of batched and unbatched operands."""
    ra, rb = _rank(a, ba), _rank(b, bb)
    if ba is not None and bb is None and ra >= 2 and rb <= 2:
        return call_op("matmul", (a, b))  # the batch is one more leading dim of a
    if ba is None and bb is not None and ra <= 2 and rb >= 2:
        return call_op("matmul", (a, b))
    size = a.shape[0] if ba is not None else b.shape[0]
    a, b = _batch(a, ba, size), _batch(b, bb, size)
    if ra == 1:
        a = a.unsqueeze(1)  # a row vector (1, k)
    if rb == 1:
        b = b.unsqueeze(-1)  # a column vector (k, 1)
    n = max(a.dim(), b.dim())
    a, b = _align(a, 0, n - 1), _align(b, 0, n - 1)
    out = call_op("matmul", (a, b))
    if rb == 1:
        out = out.squeeze(-1)
    if ra == 1:
        out = out.squeeze(-2 if rb != 1 else -1)
    return out


@_rule("matmul", "mm", "bmm", "dot")
def _matmul_rule(name):
    def rule(operands, bdims, attrs):
        return _matmul(operands[0], bdims[0], operands[1], bdims[1]), 0
    return rule


@_rule("outer")
def _outer(name):
    def rule(operands, bdims, attrs):
        (a, b), bb = operands, bdims[1]
        return call_op("mul", (a.unsqueeze(-1), b.unsqueeze(-2) if bb is not None else b)), 0
    return rule


@_rule("linear")
def _linear(name):
    def rule(operands, bdims, attrs):
        x, w, bias = operands
        bx, bw, bb = bdims
        if bw is None:
            out = call_op("linear", (x, w, bias if bb is None else None))
        else:  # a weight per example (ensembles, per-example gradients): one batched matmul
            rank = _rank(x, bx)
            out = _matmul(x, bx, w.transpose(-1, -2), 0)
            if bias is not None and bb is None:
                out = out + bias
            if rank == 0:
                raise RuntimeError("linear(): the input of each example must have at least one dim")
        if bias is not None and bb is not None:
            out = out + _align(bias, 0, out.dim() - 1)
        return out, 0
    return rule


@_rule("conv1d", "conv2d", "conv3d")
def _conv(name):
    spatial = int(name[4])

    def rule(operands, bdims, attrs):
        x, w, bias = operands
        bx, bw, bb = bdims
        size = _size(operands, bdims)
        unbatched_input = _rank(x, bx) == spatial + 1  # (C, *spatial): no N dim in the example
        if bw is None and bb is None:  # fold the batch into N
            if unbatched_input:
                return call_op(name, (x, w, bias), attrs), 0
            n = x.shape[1]
            out = call_op(name, (x.reshape((size * n,) + tuple(x.shape[2:])), w, bias), attrs)
            return out.reshape((size, n) + tuple(out.shape[1:])), 0
        # a weight per example: the batch becomes groups of one grouped convolution
        x = _batch(x, bx, size)
        if unbatched_input:
            x = x.unsqueeze(1)
        n, c = x.shape[1], x.shape[2]
        x = x.transpose(0, 1).reshape((n, size * c) + tuple(x.shape[3:]))
        w = _batch(w, bw, size)
        o = w.shape[1]
        w = w.reshape((size * o,) + tuple(w.shape[2:]))
        if bias is not None:
            bias = _batch(bias, bb, size).reshape(size * o)
        out = call_op(name, (x, w, bias), {**attrs, "groups": attrs["groups"] * size})
        out = out.reshape((n, size, o) + tuple(out.shape[2:])).transpose(0, 1)
        return (out.squeeze(1) if unbatched_input else out), 0
    return rule


@_rule("layer_norm")
def _layer_norm(name):
    def rule(operands, bdims, attrs):
        x, w, b = operands
        bx, bw, bb = bdims
        if bx is not None and bw is None and bb is None:
            return call_op(name, operands, attrs), 0
        size = _size(operands, bdims)
        out = call_op(name, (_batch(x, bx, size), w if bw is None else None, b if bb is None else None), attrs)
        rank = out.dim() - 1
        if w is not None and bw is not None:
            out = out * _align(w, 0, rank)
        if b is not None and bb is not None:
            out = out + _align(b, 0, rank)
        return out, 0
    return rule


def _fold_n(name, full_rank: Callable, always: bool = False):
    """An op on (N, C, *spatial) input, each image on its own: the batch folds into N (or, for
    an example without its N dim, is the N dim). The other operands must be shared."""
    def rule(operands, bdims, attrs):
        if any(b is not None for b in bdims[1:]) or (name == "batch_norm" and attrs["training"]):
            return _loop_rule(name)(operands, bdims, attrs)  # batch statistics are the example's own
        x = operands[0]
        if not always and x.dim() - 1 != full_rank(attrs):
            return call_op(name, operands, attrs), 0
        size, n = x.shape[0], x.shape[1]
        out = call_op(name, (x.reshape((size * n,) + tuple(x.shape[2:])),) + tuple(operands[1:]), attrs)
        return out.reshape((size, n) + tuple(out.shape[1:])), 0
    return rule


for _name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
              "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"):
    RULES[_name] = _fold_n(_name, lambda attrs, spatial=int(_name[-2]): spatial + 2)
for _name in ("interpolate_nearest", "interpolate_linear"):
    RULES[_name] = _fold_n(_name, lambda attrs: len(attrs["output_size"]) + 2)
RULES["mode_pad"] = _fold_n("mode_pad", lambda attrs: len(attrs["widths"]) + 2)
RULES["batch_norm"] = _fold_n("batch_norm", len, always=True)
RULES["group_norm"] = _fold_n("group_norm", len, always=True)


def _fold_all(name):
    """A derivative of a pooling op: every operand is (N, C, *spatial), folded alike."""
    def rule(operands, bdims, attrs):
        size = _size(operands, bdims)
        ops = [_batch(o, b, size) for o, b in zip(operands, bdims)]
        n = ops[0].shape[1]
        out = call_op(name, tuple(o.reshape((size * n,) + tuple(o.shape[2:])) for o in ops), attrs)
        return out.reshape((size, n) + tuple(out.shape[1:])), 0
    return rule


for _name in ("max_pool2d_backward", "max_pool3d_backward"):
    RULES[_name] = _fold_all(_name)


@_rule("conv2d_input_grad", "conv3d_input_grad")
def _conv_input_grad(name):
    """The input's gradient of a convolution whose weight is shared: the batch folds into N."""
    def rule(operands, bdims, attrs):
        g, w = operands
        if bdims[1] is not None:
            return _loop_rule(name)(operands, bdims, attrs)
        shape = tuple(attrs["input_shape"])
        if g.dim() - 1 == len(shape) - 1:  # the example has no N dim: the batch is N
            return call_op(name, operands, {**attrs, "input_shape": (g.shape[0],) + shape}), 0
        size, n = g.shape[0], g.shape[1]
        out = call_op(name, (g.reshape((size * n,) + tuple(g.shape[2:])), w),
                      {**attrs, "input_shape": (size * n,) + shape[1:]})
        return out.reshape((size, n) + tuple(out.shape[1:])), 0
    return rule


@_rule("pad")
def _pad(name):
    def rule(operands, bdims, attrs):
        x = operands[0]
        widths = tuple(attrs["widths"])
        if len(widths) == x.dim() - 1:  # a pair per dim of the example: none for the batch dim
            widths = ((0, 0),) + widths
        return call_op(name, operands, {**attrs, "widths": widths}), 0
    return rule


@_rule("scaled_dot_product_attention")
def _attention(name):
    def rule(operands, bdims, attrs):
        size = _size(operands, bdims)
        ops = [_batch(o, b, size) if hasattr(o, "shape") else o for o, b in zip(operands, bdims)]
        rank = max(o.dim() - 1 for o in ops if hasattr(o, "shape"))
        return call_op(name, tuple(_align(o, 0, rank) if hasattr(o, "shape") else o for o in ops), attrs), 0
    return rule


@_rule("layer_norm_backward")
def _layer_norm_backward(name):
    """The input's gradient of layer_norm: each row on its own, the batch one more leading dim."""
    def rule(operands, bdims, attrs):
        if bdims[2] is not None:
            return _loop_rule(name)(operands, bdims, attrs)
        size = _size(operands, bdims)
        return call_op(name, (_batch(operands[0], bdims[0], size), _batch(operands[1], bdims[1], size),
                              operands[2]), attrs), 0
    return rule


# -- losses --------------------------------------------------------------------------------

def _reduce_each(loss, reduction):
    """A per-element loss of each example, reduced within the example."""
    if reduction == "none":
        return loss
    flat = loss.reshape(loss.shape[0], -1)
    return flat.sum(1) if reduction == "sum" else flat.mean(1)


@_rule("mse_loss", "l1_loss")
def _pointwise_loss(name):
    def rule(operands, bdims, attrs):
        if any(o is not None for o in operands[2:]):  # a weight: the op's own mean, example by example
            return _loop_rule(name)(operands, bdims, attrs)
        size = _size(operands, bdims)
        x, t = _batch(operands[0], bdims[0], size), _batch(operands[1], bdims[1], size)
        loss = call_op(name, (x, t) + tuple(operands[2:]), {**attrs, "reduction": "none"})
        return _reduce_each(loss, attrs["reduction"]), 0
    return rule


@_rule("cross_entropy", "nll_loss")
def _class_loss(name):
    def rule(operands, bdims, attrs):
        x, t, weight = operands
        if weight is not None or t.dtype.is_floating_point:  # a weighted mean, or class probabilities
            return _loop_rule(name)(operands, bdims, attrs)
        size = _size(operands, bdims)
        x, t = _batch(x, bdims[0], size), _batch(t, bdims[1], size)
        if x.dim() == 2:  # one (C,) example each: the batch is the N dim
            loss = call_op(name, (x, t, None), {**attrs, "reduction": "none"})
            if attrs["reduction"] == "mean":
                loss = loss / (t != attrs["ignore_index"]).to(loss.dtype)
            return loss, 0
        n = x.shape[1]
        loss = call_op(name, (x.reshape((size * n,) + tuple(x.shape[2:])), t.reshape((size * n,) + tuple(t.shape[2:])),
                              None), {**attrs, "reduction": "none"})
        loss = loss.reshape((size, n) + tuple(loss.shape[1:]))
        if attrs["reduction"] == "none":
            return loss, 0
        total = loss.reshape(size, -1).sum(1)
        if attrs["reduction"] == "sum":
            return total, 0
        counted = (t != attrs["ignore_index"]).reshape(size, -1).sum(1).to(total.dtype)
        return total / counted, 0
    return rule


# -- matrix factorisations and solves: each already batches over its leading dims -----------

@_rule("cholesky_factor", "qr_factors", "svd_factors", "svd_values", "eigh_factors", "eigh_values", "eig_factors",
       "lu_factors", "linalg_inv", "linalg_det", "linalg_logabsdet")
def _factorisation(name):
    def rule(operands, bdims, attrs):
        return call_op(name, tuple(operands), attrs), 0
    return rule


@_rule("linalg_solve", "linalg_solve_triangular")
def _solve(name):
    def rule(operands, bdims, attrs):
        (a, ba), (b, bb) = zip(operands, bdims)
        size = _size(operands, bdims)
        rank = max(_rank(a, ba), _rank(b, bb))
        a, b = _align(_batch(a, ba, size), 0, rank), _align(_batch(b, bb, size), 0, rank)
        if name == "linalg_solve":  # its operands share their batch dims
            from ..core.ops._args import broadcast_shapes
            lead = tuple(broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
            a, b = a.expand(*lead, *a.shape[-2:]), b.expand(*lead, *b.shape[-2:])
        return call_op(name, (a, b), attrs), 0
    return rule
