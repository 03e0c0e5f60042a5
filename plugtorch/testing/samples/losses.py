"""Samples for the losses and normalisations, and the ops their derivatives are written with.

The backward ops (cross_entropy_backward, layer_norm_backward, batch_norm_backward) are
compared with torch's autograd of the forward, differentiated once more (create_graph) for
their own gradients, as the max_pool2d_backward samples are.
"""
from __future__ import annotations

from ._common import F, Sample, Waiver, empty, is_torch, np, scalar

SAMPLES: dict = {}


def _f(name, **kw):
    """``F.<name>(*inputs, **kw)`` on either side (tensor arguments in the op's positional order)."""
    return lambda m, *xs: getattr(F(m), name)(*xs, **kw)


def _probs(g, *shape, axis=1):
    e = np.exp(g.randn(*shape))
    return e / e.sum(axis=axis, keepdims=True)


# -- cross_entropy, nll_loss -----------------------------------------------------------------

def _cross_entropy(g):
    ce = lambda **kw: _f("cross_entropy", **kw)
    t = g.ints(4, high=3)
    return [
        Sample((g.randn(4, 3), t), call=ce()),
        Sample((g.randn(4, 3), t), call=ce(reduction="sum"), desc="sum"),
        Sample((g.randn(4, 3), t), call=ce(reduction="none"), desc="none"),
        Sample((g.randn(4, 3), np.array([0, 2, -100, 1])), call=ce(), desc="ignore_index -100"),
        Sample((g.randn(4, 3), t, g.positive(3)), call=ce(ignore_index=1, label_smoothing=0.2),
               grad_inputs=(0,), desc="weight, ignore_index in range, label_smoothing"),
        Sample((g.randn(4, 3), t, g.positive(3)), call=ce(reduction="none", label_smoothing=0.3),
               grad_inputs=(0,), desc="weight, label_smoothing, none"),
        Sample((g.randn(2, 3, 2, 2), g.ints(2, 2, 2, high=3)), call=ce(label_smoothing=0.1),
               desc="spatial (N, C, d1, d2)"),
        Sample((g.randn(2, 3, 2), g.ints(2, 2, high=3), g.positive(3)), call=ce(reduction="none"),
               grad_inputs=(0,), desc="spatial, weight, none"),
        Sample((g.randn(4), scalar(2).astype(np.int64)), call=ce(), desc="unbatched (C,), 0-d target"),
        Sample((g.randn(4), scalar(1).astype(np.int64)), call=ce(reduction="none", label_smoothing=0.1),
               desc="unbatched, none"),
        Sample((g.randn(3, 4), _probs(g, 3, 4)), call=ce(), desc="class probabilities"),
        Sample((g.randn(3, 4), _probs(g, 3, 4), g.positive(4)), call=ce(label_smoothing=0.25, reduction="sum"),
               grad_inputs=(0, 1), desc="probabilities, weight, label_smoothing"),
        Sample((g.randn(2, 3, 2), _probs(g, 2, 3, 2)), call=ce(reduction="none"), desc="spatial probabilities"),
        Sample((g.randn(4), _probs(g, 4, axis=0)), call=ce(), desc="unbatched probabilities"),
        Sample((g.randn(2, 3) * 300, np.array([0, 2])), call=ce(), desc="huge logits stay finite"),
        Sample((empty(0, 3), np.zeros(0, np.int64)), call=ce(), desc="empty batch, mean is nan"),
        Sample((empty(0, 3), np.zeros(0, np.int64)), call=ce(reduction="sum"), desc="empty batch, sum"),
        Sample((g.randn(3, 4), np.array([0, 4, 1])), call=ce(), raises=IndexError, desc="target out of range"),
        Sample((g.randn(3, 4), np.array([0, 1])), call=ce(), raises=ValueError, desc="batch size mismatch"),
        Sample((g.randn(3, 4), np.array([0, 1, 2]), np.ones(3)), call=ce(), raises=RuntimeError,
               desc="weight of the wrong size"),
        Sample((g.randn(3, 4), _probs(g, 3, 3)), call=ce(), raises=RuntimeError,
               desc="probabilities of the wrong shape"),
        Sample((g.randn(3, 4), t[:3]), call=ce(label_smoothing=1.5), raises=RuntimeError,
               desc="label_smoothing out of range"),
        Sample((g.randn(3, 4), _probs(g, 3, 4)), call=ce(ignore_index=1), raises=RuntimeError,
               desc="ignore_index with probabilities"),
        Sample((scalar(1.0), scalar(0).astype(np.int64)), call=ce(), raises=(ValueError, RuntimeError),
               desc="0-d input"),
    ]


def _cross_entropy_backward(g):
    """The logits' gradient for a given output gradient (input 0), against torch's autograd."""
    def call(**kw):
        attrs = {"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0, **kw}

        def f(m, grad_output, x, target, *weight):
            w = weight[0] if weight else None
            if is_torch(m):
                x = x if x.requires_grad else x.detach().requires_grad_(True)
                out = m.nn.functional.cross_entropy(x, target, w, **kw)
                return m.autograd.grad(out, x, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import classification
            return classification.cross_entropy_backward(grad_output, x, target, w, **attrs)
        return f
    t = g.ints(4, high=3)
    return [
        Sample((scalar(0.7), g.randn(4, 3), t), call=call(), grad_inputs=(0, 1)),
        Sample((scalar(1.3), g.randn(4, 3), t, g.positive(3)), call=call(ignore_index=2, label_smoothing=0.2),
               grad_inputs=(0, 1), desc="weight, ignore_index, label_smoothing"),
        Sample((g.randn(4), g.randn(4, 3), t, g.positive(3)), call=call(reduction="none", label_smoothing=0.1),
               grad_inputs=(0, 1), desc="none, weight, label_smoothing"),
        Sample((scalar(0.5), g.randn(2, 3, 2), g.ints(2, 2, high=3)), call=call(reduction="sum"),
               grad_inputs=(0, 1), desc="spatial, sum"),
        Sample((scalar(0.9), g.randn(3, 4), _probs(g, 3, 4), g.positive(4)), call=call(label_smoothing=0.3),
               grad_inputs=(0, 1, 2), desc="probabilities, weight, label_smoothing"),
        Sample((g.randn(3), g.randn(3, 4), _probs(g, 3, 4)), call=call(reduction="none"),
               grad_inputs=(0, 1, 2), desc="probabilities, none"),
        Sample((scalar(1.0), empty(0, 3), np.zeros(0, np.int64)), call=call(), grad_inputs=(0, 1),
               desc="empty batch"),
    ]


def _nll_loss(g):
    nll = lambda **kw: _f("nll_loss", **kw)
    t = np.array([0, 2, 1, 2])
    return [
        Sample((g.randn(4, 3), t), call=nll()),
        Sample((g.randn(4, 3), t), call=nll(reduction="sum"), desc="sum"),
        Sample((g.randn(4, 3), t, g.positive(3)), call=nll(reduction="none"), grad_inputs=(0,),
               desc="weight, none"),
        Sample((g.randn(4, 3), t, g.positive(3)), call=nll(ignore_index=2), grad_inputs=(0,),
               desc="weight, ignore_index"),
        Sample((g.randn(2, 3, 2, 2), g.ints(2, 2, 2, high=3)), call=nll(), desc="spatial"),
        Sample((g.randn(3), scalar(1).astype(np.int64)), call=nll(), desc="unbatched, 0-d target"),
        Sample((empty(0, 3), np.zeros(0, np.int64)), call=nll(), desc="empty batch"),
        Sample((g.randn(3, 4), np.array([0, -1, 1])), call=nll(), raises=IndexError,
               desc="negative target"),
        Sample((g.randn(3, 4), g.randn(3)), call=nll(), raises=RuntimeError, desc="floating target"),
        Sample((scalar(1.0), scalar(0).astype(np.int64)), call=nll(), raises=(ValueError, RuntimeError),
               desc="0-d input"),
    ]


# -- binary cross-entropy --------------------------------------------------------------------

def _binary_cross_entropy(g):
    bce = lambda **kw: _f("binary_cross_entropy", **kw)
    p, t = g.uniform(3, 4, low=0.05, high=0.95), g.uniform(3, 4, low=0, high=1)
    edges = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    return [
        Sample((p, t), call=bce()),
        Sample((p, t, g.positive(3, 4)), call=bce(reduction="sum"), grad_inputs=(0, 1), desc="weight, sum"),
        Sample((p, t, g.positive(4)), call=bce(reduction="none"), grad_inputs=(0, 1),
               desc="weight broadcast, none"),
        # torch's derivative stays finite at p = 0 and 1 (finite differences cannot step past them)
        Sample((edges, np.array([1.0, 0.0, 0.0, 1.0, 0.3])), call=bce(reduction="none"), numerical=False,
               gradgrad=False, grad_inputs=(0,), desc="p = 0 and 1"),
        Sample((np.array([0.2, 0.7, 0.0]), np.array([0.3, 0.9, 0.5])), call=bce(), numerical=False,
               gradgrad=False, desc="target gradient at p = 0 is infinite, as torch's"),
        Sample((scalar(0.3), scalar(1.0)), call=bce()),
        Sample((empty(0, 2), empty(0, 2)), call=bce(), desc="empty, mean is nan"),
        Sample((np.array([1.5, 0.5]), np.array([1.0, 0.0])), call=bce(), raises=RuntimeError,
               desc="input above 1"),
        Sample((p, t[:, :1]), call=bce(), raises=ValueError, desc="target of another size"),
    ]


def _bce_with_logits(g):
    def bce(**kw):
        return lambda m, x, t, w=None, pw=None: F(m).binary_cross_entropy_with_logits(
            x, t, w, pos_weight=pw, **kw)
    x, t = g.randn(3, 4) * 3, g.uniform(3, 4, low=0, high=1)
    return [
        Sample((x, t), call=bce()),
        Sample((x, t, g.positive(3, 4), g.positive(4)), call=bce(reduction="none"), grad_inputs=(0, 1),
               desc="weight, pos_weight, none"),
        Sample((x, t, None, g.positive(4)), call=bce(reduction="sum"), grad_inputs=(0, 1),
               desc="pos_weight, sum"),
        Sample((np.array([800.0, -800.0, 0.0]), np.array([0.0, 1.0, 1.0])), call=bce(),
               desc="huge logits stay finite"),
        Sample((scalar(-0.4), scalar(1.0)), call=bce()),
        Sample((empty(0, 2), empty(0, 2)), call=bce()),
        Sample((x, t[:, :2]), call=bce(), raises=ValueError, desc="target of another size"),
    ]


# -- regression ------------------------------------------------------------------------------

def _regression(name):
    def samples(g):
        def loss(**kw):
            return lambda m, x, t, w=None: getattr(F(m), name)(x, t, weight=w, **kw)
        # away from input == target, where l1's derivative jumps
        x = g.randn(3, 4)
        t = x + g.away(3, 4)
        return [
            Sample((x, t), call=loss()),
            Sample((x, t), call=loss(reduction="sum"), desc="sum"),
            Sample((x, t), call=loss(reduction="none"), desc="none"),
            Sample((x, t, g.positive(3, 4)), call=loss(), grad_inputs=(0, 1), desc="weight, mean"),
            Sample((x, t, g.positive(3, 4)), call=loss(reduction="none"), grad_inputs=(0, 1),
                   desc="weight, none"),
            Sample((x, t[:, :1]), call=loss(), desc="target broadcast (with torch's warning)"),
            Sample((x, t), call=lambda m, a, b: getattr(F(m), name)(a, b, size_average=False),
                   desc="legacy size_average=False"),
            Sample((scalar(0.5), scalar(-1.0)), call=loss()),
            Sample((empty(0, 3), empty(0, 3)), call=loss(), desc="empty, mean is nan"),
            Sample((x, t, np.ones(3)), call=loss(), raises=ValueError, desc="weight of another size"),
            Sample((g.ints(3), g.ints(3)), call=loss(), raises=RuntimeError, desc="integer input"),
        ]
    return samples



def _robust(name, param):
    """smooth_l1_loss (beta) and huber_loss (delta): quadratic near 0, linear beyond ``param``."""
    def samples(g):
        def loss(**kw):
            return lambda m, x, t, *w: getattr(F(m), name)(x, t, **kw, **({"weight": w[0]} if w else {}))
        x = g.randn(3, 4)
        t = x + g.away(3, 4, low=0.1, high=2.5) * np.resize([1, 3], (3, 4))  # both sides of the kink
        out = [
            Sample((x, t), call=loss()),
            Sample((x, t), call=loss(reduction="sum", **{param: 0.5}), desc=f"sum, {param}=0.5"),
            Sample((x, t), call=loss(reduction="none", **{param: 2.0}), desc=f"none, {param}=2"),
            Sample((x, t[:1]), call=loss(), desc="target broadcast (with torch's warning)"),
            Sample((scalar(0.3), scalar(-1.5)), call=loss()),
            Sample((empty(0, 3), empty(0, 3)), call=loss(reduction="sum"), desc="empty"),
            Sample((g.ints(3), g.ints(3)), call=loss(), raises=RuntimeError, desc="integer input"),
            Sample((x, t), call=loss(**{param: -1.0}), raises=RuntimeError, desc=f"negative {param}"),
        ]
        if name == "smooth_l1_loss":
            out.append(Sample((x, t), call=loss(beta=0.0), desc="beta=0 is l1"))
        else:
            out += [Sample((x, t, g.positive(3, 4)), call=loss(), grad_inputs=(0, 1), desc="weight, mean"),
                    Sample((x, t, g.positive(3, 4)), call=loss(reduction="sum"), desc="weight, sum")]
        return out
    return samples


def _kl_div(g):
    def kl(**kw):
        return lambda m, x, t: F(m).kl_div(x, t, **kw)
    logp = np.log(_probs(g, 3, 4))
    q = _probs(g, 3, 4)
    q_zero = q.copy()
    q_zero[0, 1] = 0.0
    return [
        Sample((logp, q), call=kl(reduction="batchmean")),
        Sample((logp, q), call=kl(reduction="sum"), desc="sum"),
        Sample((logp, q_zero), call=kl(reduction="none"), grad_inputs=(0,), desc="none, a zero target"),
        Sample((logp, np.log(q)), call=kl(reduction="batchmean", log_target=True), desc="log_target"),
        Sample((logp, q[:1]), call=kl(reduction="sum"), desc="target broadcast"),
        Sample((scalar(-0.5), scalar(0.3)), call=kl(reduction="batchmean"), desc="0-d, batchmean"),
        Sample((empty(0, 3), empty(0, 3)), call=kl(reduction="sum"), desc="empty"),
        Sample((logp, q), call=kl(reduction="average"), raises=ValueError, desc="unknown reduction"),
    ]


def _poisson_nll_loss(g):
    def nll(**kw):
        return lambda m, x, t: F(m).poisson_nll_loss(x, t, **kw)
    counts = g.ints(3, 4, high=6).astype(np.float64)
    # with full=True, torch's target gradient is nan at a zero count (0 * log 0 inside a masked
    # term); ours is the true 0, so those samples differentiate the input only
    return [
        Sample((g.randn(3, 4), counts), call=nll()),
        Sample((g.randn(3, 4), counts), call=nll(full=True, reduction="sum"), grad_inputs=(0,),
               desc="full, sum"),
        Sample((g.positive(3, 4), counts), call=nll(log_input=False, reduction="none"), desc="rates"),
        Sample((g.positive(3, 4), counts), call=nll(log_input=False, full=True, eps=1e-3),
               grad_inputs=(0,), desc="rates, full"),
        Sample((scalar(0.4), scalar(3.0)), call=nll(full=True)),
        Sample((empty(0, 2), empty(0, 2)), call=nll(reduction="sum"), desc="empty"),
        Sample((g.randn(2), g.randn(2)), call=nll(reduction="avg"), raises=ValueError, desc="unknown reduction"),
    ]


def _ctc_loss(g):
    """Through log_softmax, as torch asks: torch's gradient formula is the loss's derivative there."""
    def ctc(il, tl, logsm=True, **kw):
        def f(m, x, targets):
            lp = x.log_softmax(-1) if logsm else x
            return F(m).ctc_loss(lp, targets, il, tl, **kw)
        return f
    x = g.randn(6, 3, 4)
    targets = np.array([[1, 2, 2], [3, 1, 0], [2, 2, 3]])
    return [
        Sample((x, targets), call=ctc([6, 5, 6], [3, 2, 3])),
        Sample((x, targets), call=ctc([6, 4, 2], [3, 1, 0], reduction="none"), desc="none, an empty target"),
        Sample((x, targets), call=ctc([6, 6, 3], [3, 2, 3], reduction="sum", zero_infinity=True),
               desc="zero_infinity, an impossible alignment"),
        Sample((x, targets), call=ctc([6, 5, 6], [2, 2, 1], blank=3), desc="blank=3"),
        Sample((x, np.array([1, 2, 3, 1, 2])), call=ctc([6, 5, 4], [2, 2, 1]), desc="concatenated targets"),
        # straight log-probabilities: torch's formula is not their derivative, so only torch checks it
        Sample((x, targets), call=ctc([6, 5, 6], [3, 2, 3], logsm=False), numerical=False, desc="raw log_probs"),
        Sample((g.randn(3, 3), np.array([1, 2])), call=ctc(3, 2, reduction="none"),
               torch_call=lambda m, x, t: m.nn.functional.ctc_loss(x.log_softmax(-1), t, m.tensor(3), m.tensor(2),
                                                                   reduction="none"),
               desc="unbatched (T, C), small"),
        Sample((empty(6, 0, 4), np.zeros((0, 2), np.int64)), call=ctc([], [], reduction="sum"), raises=RuntimeError,
               desc="empty log_probs"),
        Sample((scalar(1.0), np.array([1])), call=ctc([1], [1]), raises=RuntimeError, desc="0-d log_probs"),
        Sample((x, targets), call=ctc([7, 5, 6], [3, 2, 3]), raises=RuntimeError, desc="input length > T"),
        Sample((x, targets), call=ctc([6, 5, 6], [3, 2, 3], blank=4), raises=RuntimeError, desc="blank out of range"),
    ]

# -- layer_norm, group_norm ------------------------------------------------------------------

def _layer_norm(g):
    def ln(shape, **kw):
        return lambda m, x, w=None, b=None: F(m).layer_norm(x, shape, w, b, **kw)
    return [
        Sample((g.randn(3, 4), g.randn(4), g.randn(4)), call=ln((4,))),
        Sample((g.randn(2, 3, 4), g.randn(3, 4)), call=ln((3, 4), eps=1e-3), desc="2-D shape, weight only"),
        Sample((g.randn(5),), call=ln((5,)), desc="no affine, 1-D input"),
        Sample((empty(0, 4), g.randn(4), g.randn(4)), call=ln((4,)), desc="empty batch"),
        Sample((scalar(1.0),), call=ln((1,)), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(2, 3),), call=ln((4,)), raises=RuntimeError, desc="shape mismatch"),
        Sample((g.randn(2, 3), g.randn(4)), call=ln((3,)), raises=RuntimeError, desc="weight of another shape"),
        Sample((g.randn(2, 3),), call=ln(()), raises=RuntimeError, desc="empty normalized_shape"),
    ]


def _layer_norm_backward(g):
    def call(shape, eps=1e-5):
        def f(m, grad_output, x, w=None):
            if is_torch(m):
                x = x if x.requires_grad else x.detach().requires_grad_(True)
                out = m.nn.functional.layer_norm(x, shape, w, None, eps)
                return m.autograd.grad(out, x, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import normalization
            return normalization.layer_norm_backward(grad_output, x, w, shape, eps)
        return f
    return [
        Sample((g.randn(3, 4), g.randn(3, 4), g.randn(4)), call=call((4,))),
        Sample((g.randn(2, 2, 3), g.randn(2, 2, 3)), call=call((2, 3), 1e-3), desc="2-D shape, no weight"),
        Sample((empty(0, 4), empty(0, 4), g.randn(4)), call=call((4,))),
        Waiver("zero_dim", "layer_norm normalises over at least one dim: its input is never 0-d"),
    ]


def _layer_norm_weight_grad(g):
    def call(shape, eps=1e-5):
        def f(m, grad_output, x):
            if is_torch(m):
                w = m.ones(shape, dtype=x.dtype, requires_grad=True)
                out = m.nn.functional.layer_norm(x, shape, w, None, eps)
                return m.autograd.grad(out, w, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import normalization
            return normalization.layer_norm_weight_grad(grad_output, x, shape, eps)
        return f
    return [
        Sample((g.randn(3, 4), g.randn(3, 4)), call=call((4,))),
        Sample((g.randn(2, 2, 3), g.randn(2, 2, 3)), call=call((2, 3), 1e-3), desc="2-D shape"),
        Sample((g.randn(5, 4), g.randn(5, 4)), call=call((5, 4)), desc="the whole tensor: no leading dims"),
        Sample((empty(0, 4), empty(0, 4)), call=call((4,))),
        Sample((g.randn(3, 4), g.randn(4, 3)), call=call((4,)), raises=RuntimeError, desc="shapes differ"),
        Waiver("zero_dim", "layer_norm normalises over at least one dim: its input is never 0-d"),
    ]


def _layer_norm_gradients(g):
    def call(shape, eps=1e-5):
        def f(m, grad_output, x, w):
            if is_torch(m):
                x = x if x.requires_grad else x.detach().requires_grad_(True)
                w = w if w.requires_grad else w.detach().requires_grad_(True)
                b = m.zeros(shape, dtype=x.dtype, requires_grad=True)
                out = m.nn.functional.layer_norm(x, shape, w, b, eps)
                grads = m.autograd.grad(out, (x, w, b), grad_output, create_graph=True)
                return m.cat([t.reshape(-1) for t in grads])
            from plugtorch.core.ops import normalization
            return normalization.layer_norm_gradients(grad_output, x, w, shape, eps)
        return f
    return [
        Sample((g.randn(3, 4), g.randn(3, 4), g.randn(4)), call=call((4,))),
        Sample((g.randn(2, 2, 3), g.randn(2, 2, 3), g.randn(2, 3)), call=call((2, 3), 1e-3), desc="2-D shape"),
        Sample((g.randn(5, 4), g.randn(5, 4), g.randn(5, 4)), call=call((5, 4)),
               desc="the whole tensor: no leading dims"),
        Sample((empty(0, 4), empty(0, 4), g.randn(4)), call=call((4,))),
        Sample((g.randn(3, 4), g.randn(4, 3), g.randn(4)), call=call((4,)), raises=RuntimeError, desc="shapes differ"),
        Waiver("zero_dim", "layer_norm normalises over at least one dim: its input is never 0-d"),
    ]


def _group_norm(g):
    def gn(groups, **kw):
        return lambda m, x, w=None, b=None: F(m).group_norm(x, groups, w, b, **kw)
    return [
        Sample((g.randn(2, 4, 3), g.randn(4), g.randn(4)), call=gn(2)),
        Sample((g.randn(2, 6, 2, 2), g.randn(6)), call=gn(3, eps=1e-3), desc="spatial, weight only"),
        Sample((g.randn(3, 4),), call=gn(4), desc="(N, C), one channel (one value) per group"),
        Sample((g.randn(2, 4, 3),), call=gn(1), desc="one group (layer norm over C, L)"),
        Sample((empty(0, 4, 2), g.randn(4), g.randn(4)), call=gn(2), desc="empty batch"),
        Sample((scalar(1.0),), call=gn(1), raises=RuntimeError, desc="0-d input"),
        Sample((g.randn(2, 6, 3),), call=gn(4), raises=RuntimeError, desc="channels not divisible"),
        Sample((g.randn(2, 6, 3), g.randn(4)), call=gn(3), raises=RuntimeError, desc="weight of another size"),
    ]


# -- batch_norm ------------------------------------------------------------------------------

def _batch_norm(g):
    def bn(**kw):
        return lambda m, x, rm=None, rv=None, w=None, b=None: F(m).batch_norm(x, rm, rv, w, b, **kw)

    def stats(c):
        return g.randn(c) * 0.1, g.positive(c)
    x = g.randn(4, 3) * 2 + 1
    return [
        Sample((x, *stats(3), g.randn(3), g.randn(3)), call=bn(training=True), mutates=(1, 2),
               grad_inputs=(0, 3, 4), desc="training moves the running statistics"),
        Sample((g.randn(2, 3, 2, 2), *stats(3), g.randn(3)), call=bn(training=True, momentum=0.3, eps=1e-3),
               mutates=(1, 2), grad_inputs=(0, 3), desc="training, spatial, momentum"),
        Sample((g.randn(3, 2, 2), None, None, g.randn(2), g.randn(2)), call=bn(training=True),
               grad_inputs=(0, 3, 4), desc="training without running statistics"),
        Sample((x, *stats(3), g.randn(3), g.randn(3)), call=bn(), grad_inputs=(0, 3, 4),
               desc="evaluation uses the running statistics"),
        Sample((g.randn(2, 3, 2), *stats(3)), call=bn(eps=1e-3), grad_inputs=(0,), desc="evaluation, no affine"),
        Sample((empty(0, 3), *stats(3)), call=bn(), grad_inputs=(0,), desc="empty batch, evaluation"),
        Sample((empty(0, 3, 2), *stats(3)), call=bn(training=True), mutates=(1, 2), grad_inputs=(0,),
               desc="empty batch, training: the statistics stay"),
        Sample((scalar(1.0),), call=bn(training=True), raises=(ValueError, IndexError), desc="0-d input"),
        Sample((g.randn(1, 3), *stats(3)), call=bn(training=True), raises=ValueError,
               desc="one value per channel in training"),
        Sample((x,), call=bn(), raises=RuntimeError, desc="evaluation without running statistics"),
        Sample((x, *stats(4)), call=bn(training=True), raises=RuntimeError, desc="statistics of another size"),
    ]


def _batch_norm_backward(g):
    def call(training, eps=1e-5):
        def f(m, grad_output, x, w=None, rm=None, rv=None):
            if is_torch(m):
                x = x if x.requires_grad else x.detach().requires_grad_(True)
                stats = (None, None) if training else (rm, rv)
                out = m.nn.functional.batch_norm(x, *stats, w, None, training, 0.1, eps)
                return m.autograd.grad(out, x, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import normalization
            return normalization.batch_norm_backward(grad_output, x, w, rm, rv, training, eps)
        return f
    return [
        Sample((g.randn(4, 3), g.randn(4, 3), g.randn(3)), call=call(True), grad_inputs=(0, 1, 2),
               desc="training"),
        Sample((g.randn(2, 2, 3), g.randn(2, 2, 3)), call=call(True, 1e-3), grad_inputs=(0, 1),
               desc="training, (N, C, L), no weight"),
        Sample((g.randn(3, 2), g.randn(3, 2), g.randn(2), g.randn(2), g.positive(2)), call=call(False),
               grad_inputs=(0, 1, 2), desc="evaluation"),
        Sample((empty(0, 2), empty(0, 2), g.randn(2), g.randn(2), g.positive(2)), call=call(False),
               grad_inputs=(0, 1, 2), desc="evaluation, empty batch"),
        Waiver("zero_dim", "batch_norm's input is (N, C, *): never 0-d"),
    ]


def _batch_norm_weight_grad(g):
    def call(training, eps=1e-5):
        def f(m, grad_output, x, rm=None, rv=None):
            if is_torch(m):
                w = m.ones(x.shape[1], dtype=x.dtype, requires_grad=True)
                stats = (None, None) if training else (rm, rv)
                out = m.nn.functional.batch_norm(x, *stats, w, None, training, 0.1, eps)
                return m.autograd.grad(out, w, grad_output, create_graph=True)[0]
            from plugtorch.core.ops import normalization
            return normalization.batch_norm_weight_grad(grad_output, x, rm, rv, training, eps)
        return f
    return [
        Sample((g.randn(4, 3), g.randn(4, 3)), call=call(True), desc="training"),
        Sample((g.randn(2, 2, 3), g.randn(2, 2, 3)), call=call(True, 1e-3), desc="training, (N, C, L)"),
        Sample((g.randn(2, 3, 2, 2), g.randn(2, 3, 2, 2)), call=call(True), desc="training, (N, C, H, W)"),
        Sample((g.randn(3, 2), g.randn(3, 2), g.randn(2), g.positive(2)), call=call(False), grad_inputs=(0, 1),
               desc="evaluation"),
        Sample((empty(0, 2), empty(0, 2), g.randn(2), g.positive(2)), call=call(False), grad_inputs=(0, 1),
               desc="evaluation, empty batch"),
        Sample((g.randn(3, 2), g.randn(2, 3)), call=call(True), raises=RuntimeError, desc="shapes differ"),
        Waiver("zero_dim", "batch_norm's input is (N, C, *): never 0-d"),
    ]


SAMPLES.update(
    cross_entropy=_cross_entropy, cross_entropy_backward=_cross_entropy_backward, nll_loss=_nll_loss,
    binary_cross_entropy=_binary_cross_entropy, binary_cross_entropy_with_logits=_bce_with_logits,
    mse_loss=_regression("mse_loss"), l1_loss=_regression("l1_loss"),
    layer_norm=_layer_norm, layer_norm_backward=_layer_norm_backward, layer_norm_weight_grad=_layer_norm_weight_grad,
    layer_norm_gradients=_layer_norm_gradients,
    group_norm=_group_norm,
    batch_norm=_batch_norm, batch_norm_backward=_batch_norm_backward, batch_norm_weight_grad=_batch_norm_weight_grad,
    smooth_l1_loss=_robust("smooth_l1_loss", "beta"), huber_loss=_robust("huber_loss", "delta"),
    kl_div=_kl_div, poisson_nll_loss=_poisson_nll_loss, ctc_loss=_ctc_loss,
)
