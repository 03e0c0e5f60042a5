"""ctc_loss: the connectionist temporal classification loss, by the forward (alpha) recursion.

Targets are extended with blanks (``b l1 b l2 ... b``, length 2S + 1); alpha[t, s] is the
log-probability of all alignments of the first t + 1 frames ending in extended position
s. Each frame is one vectorised step over the batch and the extended positions (a
logsumexp of the three ways in), so the loop runs T times, not T * S.

The derivative is torch's formula, from alpha and the backward (beta) recursion:
``exp(log_probs) - exp(log(sum of alpha * beta over the positions of class c) + nll -
log_probs)``. Its first term assumes ``log_probs`` come from ``log_softmax`` (through
which it vanishes); taken alone it is not the derivative of the loss, but it is what
torch computes, so gradients agree with torch's whichever way the inputs were made.
"""
from __future__ import annotations

from ..debug import checks_values
from ..dispatch import call_op
from ..dtypes import int64
from ..optable import Done, op
from ..tensor import Tensor
from . import elementwise as ew
from .creation import arange, full, tensor, zeros
from .loss import REDUCTIONS
from .movement import pad
from .shape import cat, stack

_NEG_INF = float("-inf")


def _lse(*xs):
    """logsumexp of same-shape tensors, -inf (with zero gradients) where all of them are -inf."""
    m = xs[0]
    for x in xs[1:]:
        m = ew.maximum(m, x)
    m = m.detach()  # logsumexp is shift-invariant: the shift needs no gradient
    dead = ew.eq(m, _NEG_INF)
    m0 = ew.where(dead, 0.0, m)
    total = ew.exp(xs[0] - m0)
    for x in xs[1:]:
        total = total + ew.exp(x - m0)
    return ew.where(dead, _NEG_INF, ew.log(ew.where(dead, 1.0, total)) + m0)


def _extended(log_probs, targets, blank):
    """(extended labels (N, K), their log-probabilities (T, N, K), where a skip from s - 2 is allowed)."""
    T, N = log_probs.shape[0], log_probs.shape[1]
    S = targets.shape[1]
    blanks = full((N, S), blank, dtype=int64, device=log_probs._backend.name)
    ext = cat([stack([blanks, targets], 2).reshape(N, 2 * S), blanks[:, :1]], 1)
    lp_ext = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, 2 * S + 1))
    skip = ew.logical_not(ew.eq(ext[:, 2:], ext[:, :-2]))     # labels differing from the one before
    no = zeros(N, 2, dtype=skip.dtype, device=log_probs._backend.name)
    return ext, lp_ext, cat([no, skip], 1)


def _shift(a, k):
    """a[..., s - k] (-inf for s < k)."""
    return pad(a, (k, 0), value=_NEG_INF)[..., :a.shape[-1]]


def _alphas(lp_ext, skip, input_lengths):
    """alpha for every frame (T, N, K); frames past a sample's input length repeat its last alpha."""
    T, N, K = lp_ext.shape
    dev = lp_ext._backend.name
    pos = arange(K, device=dev).reshape(1, K)
    start = ew.where(ew.eq(pos, 0), 0.0, _NEG_INF)               # before any frame: at position 0
    alpha = ew.where(ew.lt(pos, 2), lp_ext[0], _NEG_INF) if T else start.expand(N, K)
    alpha = ew.where(ew.gt(input_lengths, 0).unsqueeze(1), alpha, start)
    out = [alpha]
    for t in range(1, T):
        step = lp_ext[t] + _lse(alpha, _shift(alpha, 1), ew.where(skip, _shift(alpha, 2), _NEG_INF))
        alpha = ew.where(ew.lt(t, input_lengths).unsqueeze(1), step, alpha)
        out.append(alpha)
    return out


def _end(a, target_lengths):
    """log p(target) from a sample's final alpha: positions 2L and 2L - 1 (the latter if L > 0)."""
    two_l = (target_lengths * 2).unsqueeze(1)
    last = a.gather(1, two_l).squeeze(1)
    before = a.gather(1, ew.clamp(two_l - 1, min=0)).squeeze(1)
    return _lse(last, ew.where(ew.gt(target_lengths, 0), before, _NEG_INF))


def _reduce(nll, target_lengths, reduction, zero_infinity):
    if zero_infinity:
        nll = ew.where(ew.eq(nll, float("inf")), 0.0, nll)
    if reduction == "mean":
        return (nll / ew.clamp(target_lengths, min=1).to(nll.dtype)).mean()
    return nll.sum() if reduction == "sum" else nll


def _ctc_rule(ctx, g):
    lp, targets, il, tl = ctx.saved
    a = ctx.attrs
    T, N, C = lp.shape
    ext, lp_ext, skip = _extended(lp, targets, a["blank"])
    K = lp_ext.shape[2]
    alphas = _alphas(lp_ext, skip, il)
    nll = -_end(alphas[-1], tl)
    # beta[t, s]: log-probability of frames t.. given position s at frame t (its emission included)
    dev = lp._backend.name
    pos = arange(K, device=dev).reshape(1, K)
    two_l = (tl * 2).unsqueeze(1)
    final = ew.logical_or(ew.eq(pos, two_l), ew.logical_and(ew.eq(pos, two_l - 1), ew.gt(tl, 0).unsqueeze(1)))
    final = ew.where(final, 0.0, _NEG_INF)
    skip_up = pad(skip, (0, 2), value=False)[:, 2:]                 # a skip from s to s + 2
    nxt = full((N, K), _NEG_INF, dtype=lp.dtype, device=dev)
    betas = [None] * T
    for t in reversed(range(T)):
        spread = _lse(nxt, _shift_up(nxt, 1), ew.where(skip_up, _shift_up(nxt, 2), _NEG_INF))
        base = ew.where(ew.eq(il - 1, t).unsqueeze(1), final, spread)
        nxt = betas[t] = ew.where(ew.lt(t, il).unsqueeze(1), base + lp_ext[t], _NEG_INF)
    ab = stack(alphas, 0) + stack(betas, 0)                          # (T, N, K), frame t counted twice
    m = ab.detach().amax(2, keepdim=True)
    m0 = ew.where(ew.eq(m, _NEG_INF), 0.0, m)
    by_class = zeros(T, N, C, dtype=lp.dtype, device=dev).scatter_add(
        2, ext.unsqueeze(0).expand(T, N, K), ew.exp(ab - m0))
    seen = ew.gt(by_class, 0)  # -inf where class c has no alignment (a safe log: no nan in double backward)
    lcab = ew.where(seen, ew.log(ew.where(seen, by_class, 1.0)) + m0, _NEG_INF)
    impossible = ew.eq(nll, float("inf")).reshape(1, N, 1)
    per = ew.exp(lp) - ew.exp(lcab + ew.where(impossible, 0.0, nll.reshape(1, N, 1)) - lp)
    per = ew.where(impossible, float("nan"), per)  # torch's value there (-inf + inf); zero_infinity zeroes it
    red = a["reduction"]
    up = g.expand(N) if red != "none" else g
    if red == "mean":
        up = up / ew.clamp(tl, min=1).to(lp.dtype) / N
    keep = ew.lt(arange(T, device=dev).reshape(T, 1), il.reshape(1, N))
    if a["zero_infinity"]:
        keep = ew.logical_and(keep, ew.logical_not(impossible[0, :, 0]))
    return ew.where(keep.unsqueeze(2), per * up.reshape(1, N, 1), 0.0), None, None, None


def _shift_up(a, k):
    """a[..., s + k] (-inf past the end)."""
    return pad(a, (0, k), value=_NEG_INF)[..., k:]


def _lengths(what, v, n, device):
    t = v if isinstance(v, Tensor) else tensor(list(v) if isinstance(v, (list, tuple)) else [v], device=device)
    t = t.to(int64).reshape(-1) if t.ndim <= 1 else t
    if tuple(t.shape) != (n,):
        raise RuntimeError(f"ctc_loss(): {what} must have one length per batch element ({n}), got shape "
                           f"{list(t.shape)}")
    return t


def _ctc_loss_args(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
                   zero_infinity=False):
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        raise TypeError("ctc_loss(): log_probs and targets must be Tensors")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not log_probs.dtype.is_floating_point:
        raise RuntimeError(f"ctc_loss(): expected floating point log_probs, got {log_probs.dtype.name}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise RuntimeError(f"ctc_loss(): log_probs must be (T, N, C) or (T, C), got shape {list(log_probs.shape)}")
    T, N, C = lp.shape
    if lp.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    dev = lp._backend.name
    il = _lengths("input_lengths", input_lengths, N, dev)
    tl = _lengths("target_lengths", target_lengths, N, dev)
    tg = targets.to(int64)
    if unbatched:
        tg = tg.reshape(1, -1)
    elif tg.ndim == 1:  # concatenated targets: split them by length (host values of the lengths)
        sizes = tl.tolist()
        if sum(sizes) != tg.shape[0]:
            raise RuntimeError(f"ctc_loss(): concatenated targets hold {tg.shape[0]} labels, target_lengths sum "
                               f"to {sum(sizes)}")
        width, parts, start = max(sizes, default=0), [], 0
        for s in sizes:
            parts.append(pad(tg[start:start + s], (0, width - s), value=blank))
            start += s
        tg = stack(parts, 0) if parts else zeros(0, 0, dtype=int64, device=dev)
    if tg.ndim != 2 or tg.shape[0] != N:
        raise RuntimeError(f"ctc_loss(): targets must be (N, S) or concatenated 1-D, got shape {list(targets.shape)}")
    if N and checks_values(il):  # reads values: see checks_values
        lo, hi = ew.minimum(il.min(), 0).item(), il.max().item()
        if hi > T or lo < 0:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {hi} (while "
                               "checking arguments for ctc_loss)")
        if tl.max().item() > tg.shape[1] or tl.min().item() < 0:
            raise RuntimeError(f"Expected tensor to have size at least {tl.max().item()} at dimension 1, but got "
                               f"size {tg.shape[1]} for argument #2 'targets' (while checking arguments for ctc_loss)")
    operands, attrs = (lp, tg, il, tl), {"blank": int(blank), "reduction": reduction,
                                         "zero_infinity": bool(zero_infinity)}
    if unbatched and reduction == "none":  # computed as a batch of one: the one loss, 0-d
        return Done(call_op("ctc_loss", operands, attrs).reshape(()))
    return operands, attrs


@op(bind=_ctc_loss_args, derivative=_ctc_rule, save="inputs", exposed=("nn.functional",),
    dtypes="floating log_probs; integer targets and lengths")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, *, blank, reduction, zero_infinity):
    """The CTC loss of (T, N, C) log-probabilities against targets (N, S) padded or concatenated;
    'mean' divides each loss by its target length, then averages over the batch, as torch does.

    The gradient is torch's (see the module docstring): feed ``log_softmax`` outputs, as torch
    asks. ``zero_infinity`` zeroes impossible alignments' losses and gradients. A backend
    kernel receives log_probs (T, N, C), targets (N, S) padded, input_lengths and
    target_lengths (int64, (N,)), and blank, reduction and zero_infinity by name.
    """
    _, lp_ext, skip = _extended(log_probs, targets, blank)
    nll = -_end(_alphas(lp_ext, skip, input_lengths)[-1], target_lengths)
    return _reduce(nll, target_lengths, reduction, zero_infinity)
