"""Normalisation: layer_norm, batch_norm, group_norm, and the ops their derivatives are written with.

Each op standardises its input over some axes ((x - mean) / sqrt(biased var + eps)), then
scales and shifts it. The input gradient of a standardisation is one formula,
rstd * (gy - mean(gy) - xhat * mean(gy * xhat)); it is the registered op
``layer_norm_backward`` (group_norm uses it too, on its grouped view) and
``batch_norm_backward``, so a backend that fuses a forward can fuse its backward; the
weight and bias gradients are plain reductions, written in the rules. The rules recompute
the statistics from the saved input instead of keeping them: ops return one tensor.

Each op's function is its decomposition; its ``bind`` checks torch's arguments (shapes,
dtypes) and promotes input, weight and bias to one dtype, so a kernel receives validated
arrays. batch_norm in training mode moves ``running_mean``/``running_var`` in place (see its
docstring): the op writes its running-statistics operands, as torch's and cuDNN's kernels
do, so a fused kernel updates them from the statistics it computes anyway.
"""
from __future__ import annotations

from ..dispatch import wrap
from ..dtypes import promote_types
from ..grad_mode import no_grad
from ..optable import Done, op, public
from ..tensor import Tensor
from . import elementwise as ew
from .shape import cat

_F = ("nn.functional",)
_PROMOTED = "floating; input, weight and bias promoted to one dtype"


# -- shared pieces ---------------------------------------------------------------------------

def _centred(x, axes):
    """x - mean, the biased variance and the mean over ``axes`` (kept as size-1 dims)."""
    mean = x.mean(axes, keepdim=True)
    xc = x - mean
    return xc, (xc * xc).mean(axes, keepdim=True), mean


def _standardized(x, axes, eps):
    """xhat = (x - mean) * rstd over ``axes``, and rstd = 1 / sqrt(var + eps)."""
    xc, var, _ = _centred(x, axes)
    rstd = ew.rsqrt(var + eps)
    return xc * rstd, rstd


def _standardized_grad(gy, xc, rstd, axes, scale=None):
    """scale * rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), xhat = xc * rstd: the input
    gradient of a standardisation over ``axes`` for the gradient ``gy`` of xhat.

    Written as gy * a - xc * b - c with a, b, c per reduced slice, so the full-size work
    is four passes (and one for the reduction of gy * xc); ``scale`` (batch_norm's weight,
    which broadcasts like rstd) folds into a, b and c.
    """
    a = rstd if scale is None else rstd * scale
    b = (gy * xc).mean(axes, keepdim=True) * (a * rstd * rstd)
    return gy * a - xc * b - gy.mean(axes, keepdim=True) * a


def _summed(t, axes):
    return t.sum(axes) if axes else t  # sum(()) would reduce everything


def _affine(xhat, weight, bias, shape=None):
    out = xhat if weight is None else xhat * (weight if shape is None else weight.reshape(shape))
    return out if bias is None else out + (bias if shape is None else bias.reshape(shape))


def _check_float(op_name, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op_name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op_name}(): expected a floating point input, got {input.dtype.name}; "
                           "convert it first with .float()")


def _check_backward(op_name, ok, expected, **named):
    """The backward ops are called by rules with matching shapes; anyone else gets a clear error."""
    if not ok:
        got = ", ".join(f"{k} {list(v.shape) if isinstance(v, Tensor) else v}" for k, v in named.items())
        raise RuntimeError(f"{op_name}: expected {expected}; got {got}")


def _params(op_name, input, **params):
    """input, then the params, in their promoted dtype."""
    dtype = input.dtype
    for what, p in params.items():
        if p is not None:
            if not isinstance(p, Tensor):
                raise TypeError(f"{op_name}(): argument '{what}' must be Tensor, not {type(p).__name__}")
            dtype = promote_types(dtype, p.dtype)
    return [t if t is None or t.dtype is dtype else t.to(dtype) for t in (input, *params.values())]


# -- layer_norm ------------------------------------------------------------------------------

def _trailing(ndim, k):
    return tuple(range(ndim - k, ndim))


def _layer_norm_rule(ctx, g):
    x, w, _ = ctx.saved
    a = ctx.attrs
    need = ctx.needs_input_grad
    if need[0] and need[1]:  # a layer's usual backward: all three from one op, one pass
        flat = layer_norm_gradients(g, x, w, **a)
        n, k = x.numel(), w.numel()
        return flat[:n].view(x.shape), flat[n:n + k].view(w.shape), flat[n + k:].view(w.shape) if need[2] else None
    k = len(a["normalized_shape"])
    lead = tuple(range(x.ndim - k))
    gx = layer_norm_backward(g, x, w, **a) if need[0] else None
    gw = layer_norm_weight_grad(g, x, **a) if need[1] else None
    gb = _summed(g, lead) if need[2] else None
    return gx, gw, gb


def _layer_norm_args(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    _check_float("layer_norm", input)
    if input.dtype.itemsize == 2 and any(isinstance(p, Tensor) and p.dtype.name == "float32" for p in (weight, bias)):
        # torch's mixed types: a 16-bit input with float32 params is normalised in float32 and
        # returned in its own dtype (what autocast's bfloat16 activations meet on the CPU)
        return Done(layer_norm(input.float(), normalized_shape, weight, bias, eps).to(input.dtype))
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                           "least one element, but got normalized_shape = []")
    if input.ndim < len(shape) or tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    for what, p in (("weight", weight), ("bias", bias)):
        if isinstance(p, Tensor) and tuple(p.shape) != shape:
            raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape, but got {what} "
                               f"of shape {list(p.shape)} and normalized_shape = {list(shape)}")
    return _params("layer_norm", input, weight=weight, bias=bias), {"normalized_shape": shape, "eps": float(eps)}


def _layer_norm_jvp(primals, tangents, out, attrs):
    x, w, _ = primals
    tx, tw, tb = tangents
    axes = _trailing(x.ndim, len(attrs["normalized_shape"]))
    xc, var, _ = _centred(x, axes)
    rstd = ew.rsqrt(var + attrs["eps"])
    terms = []
    if tx is not None:  # the standardisation's Jacobian is symmetric: its JVP is its gradient's formula
        t = _standardized_grad(tx, xc, rstd, axes)
        terms.append(t if w is None else t * w)
    if tw is not None:
        terms.append(xc * rstd * tw)
    if tb is not None:
        terms.append(tb)
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


@op(bind=_layer_norm_args, derivative=_layer_norm_rule, save=(0, 1), exposed=_F, dtypes=_PROMOTED,
    jvp=_layer_norm_jvp)
def layer_norm(input, weight, bias, *, normalized_shape, eps):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance), then scale and shift.

    A backend kernel receives input, weight and bias (both of shape normalized_shape, or
    None) as floating arrays of one dtype, and normalized_shape (a tuple of ints matching
    input's trailing dims) and eps by name.
    """
    return _affine(_standardized(input, _trailing(input.ndim, len(normalized_shape)), eps)[0], weight, bias)


def _layer_norm_backward_args(grad_output, input, weight, normalized_shape, eps):
    shape = tuple(normalized_shape)
    _check_backward("layer_norm_backward", input.ndim >= len(shape) and input.shape[input.ndim - len(shape):] == shape
                    and grad_output.shape == input.shape and (weight is None or weight.shape == shape),
                    f"grad_output and input of one shape [*, {', '.join(map(str, shape))}], weight {list(shape)}",
                    grad_output=grad_output, input=input, weight=weight)
    return (grad_output, input, weight), {"normalized_shape": shape, "eps": eps}


@op(bind=_layer_norm_backward_args, dtypes="as layer_norm's")
def layer_norm_backward(grad_output, input, weight, *, normalized_shape, eps):
    """The gradient of layer_norm with respect to its input (weight may be None).

    A kernel receives grad_output and input of one shape, weight (normalized_shape) or None,
    and normalized_shape and eps by name; it returns an array of input's shape.
    """
    axes = _trailing(input.ndim, len(normalized_shape))
    xc, var, _ = _centred(input, axes)
    gy = grad_output if weight is None else grad_output * weight
    return _standardized_grad(gy, xc, ew.rsqrt(var + eps), axes)


def _layer_norm_weight_grad_args(grad_output, input, normalized_shape, eps):
    shape = tuple(normalized_shape)
    trailing = input.shape[input.ndim - len(shape):] if input.ndim >= len(shape) else None
    _check_backward("layer_norm_weight_grad", trailing == shape and grad_output.shape == input.shape,
                    f"grad_output and input of one shape [*, {', '.join(map(str, shape))}]",
                    grad_output=grad_output, input=input)
    return (grad_output, input), {"normalized_shape": shape, "eps": eps}


@op(bind=_layer_norm_weight_grad_args, dtypes="as layer_norm's")
def layer_norm_weight_grad(grad_output, input, *, normalized_shape, eps):
    """The gradient of layer_norm with respect to its weight: grad_output * xhat summed over the
    leading dims (one op, so a backend computes it in the pass it reads x in anyway).

    A kernel receives grad_output and input of one shape, and normalized_shape and eps by name;
    it returns an array of shape normalized_shape.
    """
    axes = _trailing(input.ndim, len(normalized_shape))
    return _summed(grad_output * _standardized(input, axes, eps)[0], tuple(range(input.ndim - len(axes))))


def _layer_norm_gradients_args(grad_output, input, weight, normalized_shape, eps):
    shape = tuple(normalized_shape)
    _check_backward("layer_norm_gradients", input.ndim >= len(shape) and input.shape[input.ndim - len(shape):] == shape
                    and grad_output.shape == input.shape and isinstance(weight, Tensor) and weight.shape == shape,
                    f"grad_output and input of one shape [*, {', '.join(map(str, shape))}], weight {list(shape)}",
                    grad_output=grad_output, input=input, weight=weight)
    return (grad_output, input, weight), {"normalized_shape": shape, "eps": eps}


@op(bind=_layer_norm_gradients_args, dtypes="as layer_norm's")
def layer_norm_gradients(grad_output, input, weight, *, normalized_shape, eps):
    """The gradients of layer_norm's input, weight and bias for ``grad_output``, flattened and joined
    into one 1-D tensor in that order (ops return one tensor; layer_norm's rule takes views of it):
    one op, so that a backend computes all three in one pass over grad_output and input, as torch's
    native_layer_norm_backward does.

    A kernel receives grad_output and input of one shape, weight (normalized_shape), and
    normalized_shape and eps by name; it returns a 1-D array of input's size plus twice weight's.
    """
    gx = layer_norm_backward(grad_output, input, weight, normalized_shape, eps)
    gw = layer_norm_weight_grad(grad_output, input, normalized_shape, eps)
    gb = _summed(grad_output, tuple(range(input.ndim - len(normalized_shape))))
    return cat([gx.reshape(-1), gw.reshape(-1), gb.reshape(-1)])


@public("plugtorch", name="layer_norm")
def torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """``torch.layer_norm``: nn.functional's, plus torch's cudnn_enable flag (there is no cuDNN to pick)."""
    return layer_norm(input, normalized_shape, weight, bias, eps)


# -- batch_norm ------------------------------------------------------------------------------

def _channels(input):
    """The shape a per-channel (C,) tensor takes to broadcast over (N, C, *), and the other axes."""
    return (1, input.shape[1]) + (1,) * (input.ndim - 2), (0,) + tuple(range(2, input.ndim))


def _batch_norm_rule(ctx, g):
    x, rm, rv, w, _ = ctx.saved
    a = ctx.attrs
    need = ctx.needs_input_grad
    training, eps = a["training"], a["eps"]
    if training:  # running stats are not read (and were written): pass None
        rm = rv = None
    gx = batch_norm_backward(g, x, w, rm, rv, training, eps) if need[0] else None
    gw = batch_norm_weight_grad(g, x, rm, rv, training, eps) if need[3] else None
    gb = g.sum(_channels(x)[1]) if need[4] else None
    return gx, None, None, gw, gb  # torch does not differentiate the running statistics either


def _stat_operand(t, training):
    """In training, the op writes the running stats but its rule never reads them: it gets a
    tensor sharing their memory with a version counter of its own, so the graph node holding
    it does not fail a later backward when the next forward moves the statistics again."""
    if t is None or not training:
        return t
    alias = wrap(t._data, t._backend)
    alias._vc = [t._vc[0]]
    return alias


def _batch_norm_args(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                     eps=1e-05):
    _check_float("batch_norm", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C, *), got {list(input.shape)}")
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' must be float, not NoneType (BatchNorm's "
                        "momentum=None, a cumulative average, passes 1 / num_batches_tracked)")
    c = input.shape[1]
    named = {"running_mean": running_mean, "running_var": running_var, "weight": weight, "bias": bias}
    for what, t in named.items():
        if isinstance(t, Tensor) and (t.numel() != c or t.ndim != 1):
            raise RuntimeError(f"{what} should contain {c} elements not {t.numel()} (a vector, one per "
                               f"channel of the input of shape {list(input.shape)})")
    x, w, b = _params("batch_norm", input, weight=weight, bias=bias)
    for what in ("running_mean", "running_var"):
        t = named[what]
        if t is not None and (not isinstance(t, Tensor) or t.dtype is not x.dtype):
            got = t.dtype.name if isinstance(t, Tensor) else type(t).__name__
            raise RuntimeError(f"batch_norm: {what} must be a Tensor of the input's dtype {x.dtype.name}, "
                               f"got {got}; convert the module or the input so they match")
    if training:
        if x.numel() == 0:
            return Done(x.clone())  # nothing to normalise, no statistics to move (as torch)
        if x.numel() // c <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{input.shape}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean must be defined in evaluation mode (and running_var): pass the "
                           "running statistics, or training=True to normalise by the batch's")
    training = bool(training)
    operands = (x, _stat_operand(running_mean, training), _stat_operand(running_var, training), w, b)
    if training:  # the op writes the running statistics: their versions move with the call
        for t in (running_mean, running_var):
            if t is not None:
                t._vc[0] += 1
    return operands, {"training": training, "momentum": float(momentum), "eps": float(eps)}


@op(bind=_batch_norm_args, derivative=_batch_norm_rule, save=(0, 1, 2, 3), exposed=_F,
    dtypes=_PROMOTED + "; the running statistics must have that dtype")
def batch_norm(input, running_mean, running_var, weight, bias, *, training, momentum, eps):
    """Normalise each channel of an (N, C, *) input, then scale and shift; training moves the running stats.

    Training: the batch's statistics (biased variance) normalise, and running_mean and
    running_var, when given, move in place towards the batch's (unbiased variance):
    r = (1 - momentum) * r + momentum * batch. Evaluation: the running statistics normalise.

    A backend kernel receives input (N, C, *) with N * d1 * ... > 1 in training, running_mean
    and running_var (C,) (None allowed in training), weight and bias (C,) or None — all
    floating, of one dtype — and training (bool), momentum and eps (floats) by name. In
    training it must update the running statistics it is given in place: the op mutates
    those operands, and its bind bumps their version counters.
    """
    # per-channel scale and shift folded first: the full-size work is a multiply and an add
    shape, axes = _channels(input)
    if not training:
        scale = ew.rsqrt(running_var.reshape(shape) + eps)
        scale = scale if weight is None else scale * weight.reshape(shape)
        shift = -running_mean.reshape(shape) * scale
        return input * scale + (shift if bias is None else shift + bias.reshape(shape))
    xc, var, mean = _centred(input, axes)
    if running_mean is not None or running_var is not None:
        n = input.numel() // input.shape[1]
        with no_grad():  # the running estimate uses the unbiased variance, as torch's
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.reshape(running_mean.shape) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(var.reshape(running_var.shape) * (momentum * n / (n - 1)))
    scale = ew.rsqrt(var + eps)
    out = xc * (scale if weight is None else scale * weight.reshape(shape))
    return out if bias is None else out + bias.reshape(shape)


def _batch_norm_backward_args(grad_output, input, weight, running_mean, running_var, training, eps):
    c = input.shape[1] if input.ndim >= 2 else -1
    stats = () if training else (running_mean, running_var)
    _check_backward("batch_norm_backward", c >= 0 and grad_output.shape == input.shape
                    and all(t is not None and t.shape == (c,) for t in stats)
                    and (weight is None or weight.shape == (c,)),
                    "grad_output and input of one shape (N, C, *), weight (C,) or None, and in evaluation "
                    "running_mean and running_var (C,)", grad_output=grad_output, input=input, weight=weight,
                    running_mean=running_mean, running_var=running_var)
    return (grad_output, input, weight, running_mean, running_var), {"training": bool(training), "eps": eps}


@op(bind=_batch_norm_backward_args, dtypes="as batch_norm's")
def batch_norm_backward(grad_output, input, weight, running_mean, running_var, *, training, eps):
    """The gradient of batch_norm with respect to its input.

    A kernel receives grad_output and input (N, C, *), weight (C,) or None, running_mean and
    running_var (C,) in evaluation (None in training: the batch's statistics are recomputed
    from input), and training and eps by name; it returns an array of input's shape.
    """
    shape, axes = _channels(input)
    scale = None if weight is None else weight.reshape(shape)
    if not training:
        rstd = ew.rsqrt(running_var.reshape(shape) + eps)
        return grad_output * (rstd if scale is None else rstd * scale)
    xc, var, _ = _centred(input, axes)
    return _standardized_grad(grad_output, xc, ew.rsqrt(var + eps), axes, scale)


def _batch_norm_weight_grad_args(grad_output, input, running_mean, running_var, training, eps):
    c = input.shape[1] if input.ndim >= 2 else -1
    stats = () if training else (running_mean, running_var)
    _check_backward("batch_norm_weight_grad", c >= 0 and grad_output.shape == input.shape
                    and all(t is not None and t.shape == (c,) for t in stats),
                    "grad_output and input of one shape (N, C, *), and in evaluation running_mean and "
                    "running_var (C,)", grad_output=grad_output, input=input, running_mean=running_mean,
                    running_var=running_var)
    return (grad_output, input, running_mean, running_var), {"training": bool(training), "eps": eps}


@op(bind=_batch_norm_weight_grad_args, dtypes="as batch_norm's")
def batch_norm_weight_grad(grad_output, input, running_mean, running_var, *, training, eps):
    """The gradient of batch_norm with respect to its weight: per channel, the sum of
    grad_output * xhat (one op, so a backend computes it in the pass it reads x in anyway).

    A kernel receives grad_output and input (N, C, *), running_mean and running_var (C,) in
    evaluation (None in training), and training and eps by name; it returns a (C,) array.
    """
    shape, axes = _channels(input)
    if training:
        xc, var, _ = _centred(input, axes)
    else:
        xc, var = input - running_mean.reshape(shape), running_var.reshape(shape)
    return (grad_output * xc).sum(axes) * ew.rsqrt(var + eps).reshape(-1)


@public("plugtorch", name="batch_norm")
def torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """``torch.batch_norm``: torch's argument order (weight and bias first), unlike nn.functional's."""
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


# -- group_norm ------------------------------------------------------------------------------

def _grouped(x, groups):
    """(N, G, C / G * d1 * ...): each group's values on the last axis (sizes spelled out, for N = 0)."""
    length = x.shape[1] // groups
    for s in x.shape[2:]:
        length *= s
    return (x.shape[0], groups, length)


def _group_norm_rule(ctx, g):
    # a group is a layer_norm over (C / G, d1, ...) without affine: its backward op serves
    x, w, _ = ctx.saved
    a = ctx.attrs
    need = ctx.needs_input_grad
    groups, eps = a["num_groups"], a["eps"]
    shape, axes = _channels(x)
    grouped = _grouped(x, groups)
    gx = gw = gb = None
    if need[0]:
        gy = (g if w is None else g * w.reshape(shape)).reshape(grouped)
        gx = layer_norm_backward(gy, x.reshape(grouped), None, (grouped[2],), eps).reshape(x.shape)
    if need[1]:
        xhat = _standardized(x.reshape(grouped), (2,), eps)[0].reshape(x.shape)
        gw = (g * xhat).sum(axes)
    if need[2]:
        gb = g.sum(axes)
    return gx, gw, gb


def _group_norm_args(input, num_groups, weight=None, bias=None, eps=1e-05):
    _check_float("group_norm", input)
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    c = input.shape[1]
    if not isinstance(num_groups, int) or num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got "
                           f"input of shape {list(input.shape)} and num_groups={num_groups}")
    for what, p in (("weight", weight), ("bias", bias)):
        if isinstance(p, Tensor) and (p.ndim != 1 or p.numel() != c):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of channels in "
                               f"input, but got {what} of shape {list(p.shape)} and input of shape "
                               f"{list(input.shape)}")
    return _params("group_norm", input, weight=weight, bias=bias), {"num_groups": num_groups, "eps": float(eps)}


@op(bind=_group_norm_args, derivative=_group_norm_rule, save=(0, 1), exposed=_F, dtypes=_PROMOTED)
def group_norm(input, weight, bias, *, num_groups, eps):
    """Normalise each of ``num_groups`` groups of channels of an (N, C, *) input; scale and shift per channel.

    A backend kernel receives input (N, C, *) with C divisible by num_groups, weight and bias
    (C,) or None — floating, of one dtype — and num_groups (int) and eps by name.
    """
    xhat = _standardized(input.reshape(_grouped(input, num_groups)), (2,), eps)[0].reshape(input.shape)
    return _affine(xhat, weight, bias, _channels(input)[0])


@public("plugtorch", name="group_norm")
def torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """``torch.group_norm``: nn.functional's, plus torch's cudnn_enabled flag (there is no cuDNN to pick)."""
    return group_norm(input, num_groups, weight, bias, eps)
