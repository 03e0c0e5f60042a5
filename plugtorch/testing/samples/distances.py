"""Samples for normalize, the distances and the metric-learning losses."""
from __future__ import annotations

from ._common import F, Sample, empty, np, scalar

SAMPLES: dict = {}


def _normalize(g):
    def nz(**kw):
        return lambda m, x: F(m).normalize(x, **kw)
    x = g.randn(3, 4)
    zero_row = x.copy()
    zero_row[1] = 0.0
    return [
        Sample((x,), call=nz()),
        Sample((x,), call=nz(p=1.0, dim=0), desc="p=1, dim=0"),
        Sample((x,), call=nz(p=3.0, dim=-1), desc="p=3"),
        # the gradient there is 1/eps: finite differences cannot resolve it, torch's gradient can
        Sample((zero_row,), call=nz(), gradgrad=False, numerical=False, desc="a zero row (eps)"),
        Sample((scalar(-2.0),), call=nz(dim=0), desc="0-d"),
        Sample((empty(0, 3),), call=nz(), desc="empty"),
        Sample((g.ints(3, 4),), call=nz(), raises=RuntimeError, desc="integer input"),
    ]


def _cosine_similarity(g):
    def cs(**kw):
        return lambda m, a, b: F(m).cosine_similarity(a, b, **kw)
    x = g.randn(3, 4)
    zero_row = x.copy()
    zero_row[2] = 0.0
    return [
        Sample((x, g.randn(3, 4)), call=cs()),
        Sample((x, g.randn(3, 4)), call=cs(dim=0), desc="dim=0"),
        Sample((x, g.randn(4)), call=cs(dim=-1), desc="broadcast"),
        Sample((zero_row, g.randn(3, 4)), call=cs(), gradgrad=False, numerical=False, desc="a zero row (eps)"),
        Sample((g.randn(2, 2), g.randn(2, 2)), call=cs(eps=1e-3), desc="small"),
        Sample((scalar(1.5), scalar(-0.5)), call=cs(dim=0), desc="0-d"),
        Sample((empty(0, 3), empty(0, 3)), call=cs(), desc="empty"),
        Sample((g.randn(2, 3), g.randn(4, 3)), call=cs(), raises=RuntimeError, desc="shapes do not broadcast"),
    ]


def _pairwise_distance(g):
    def pd(**kw):
        return lambda m, a, b: F(m).pairwise_distance(a, b, **kw)
    return [
        Sample((g.randn(3, 4), g.randn(3, 4)), call=pd()),
        Sample((g.randn(3, 4), g.randn(3, 4)), call=pd(p=1.0, keepdim=True), desc="p=1, keepdim"),
        Sample((g.randn(3, 4), g.randn(3, 4)), call=pd(p=float("inf")), desc="p=inf"),
        Sample((g.randn(3, 4), g.randn(4)), call=pd(p=3.0), desc="broadcast, p=3"),
        Sample((g.randn(2), g.randn(2)), call=pd(), desc="1-D"),
        Sample((scalar(1.5), scalar(-0.5)), call=pd(), desc="0-d"),
        Sample((empty(0, 3), empty(0, 3)), call=pd(), desc="empty"),
    ]


def _triplet_margin_loss(g):
    def tl(**kw):
        return lambda m, a, p, n: F(m).triplet_margin_loss(a, p, n, **kw)
    a, p, n = g.randn(4, 3), g.randn(4, 3), g.randn(4, 3)
    return [
        Sample((a * 0.3, p * 0.3, n), call=tl()),
        Sample((a * 0.3, p * 0.3, n), call=tl(margin=0.5, p=1, swap=True, reduction="none"), desc="swap, p=1, none"),
        Sample((a, p, n), call=tl(margin=2.0, reduction="sum"), desc="sum"),
        Sample((a[0], p[0], n[0]), call=tl(margin=3.0), desc="1-D"),
        Sample((scalar(0.1), scalar(0.3), scalar(1.0)), call=tl(), desc="0-d"),
        Sample((empty(0, 3), empty(0, 3), empty(0, 3)), call=tl(reduction="sum"), desc="empty"),
        Sample((a, p, n), call=tl(margin=0.0), raises=ValueError, desc="margin 0"),
        Sample((a, p, n[0]), call=tl(), raises=RuntimeError, desc="ranks differ"),
    ]


def _margin_ranking_loss(g):
    def mr(**kw):
        return lambda m, a, b, t: F(m).margin_ranking_loss(a, b, t, **kw)
    a, b = g.randn(5), g.randn(5)
    b = np.where(np.abs(a - b) < 0.3, b + 1.0, b)  # away from the hinge
    t = np.sign(g.randn(5))
    return [
        Sample((a, b, t), call=mr()),
        Sample((a, b, t), call=mr(margin=0.1, reduction="none"), desc="margin, none"),
        Sample((a, b, t), call=mr(reduction="sum"), desc="sum"),
        Sample((scalar(0.2), scalar(1.0), scalar(-1.0)), call=mr(margin=0.5), desc="0-d"),
        Sample((empty(0), empty(0), empty(0)), call=mr(reduction="sum"), desc="empty"),
        Sample((a, b, t.reshape(5, 1)), call=mr(), raises=RuntimeError, desc="ranks differ"),
    ]


SAMPLES.update(normalize=_normalize, cosine_similarity=_cosine_similarity, pairwise_distance=_pairwise_distance,
               triplet_margin_loss=_triplet_margin_loss, margin_ranking_loss=_margin_ranking_loss)


# -- cdist, pdist, dist --------------------------------------------------------------------------

def _pairwise_ref(a, b, p):
    d = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(float)
    if p == float("inf"):
        return d.max(-1) if d.shape[-1] else np.zeros(d.shape[:-1])
    return (d ** p).sum(-1) ** (1 / p)


def _cdist(g):
    return [
        Sample((g.randn(3, 2), g.randn(4, 2)), ref=lambda a, b: _pairwise_ref(a, b, 2)),
        Sample((g.randn(2, 3, 2), g.randn(4, 2)), ref=lambda a, b: _pairwise_ref(a, b, 2), desc="batch broadcasts"),
        Sample((g.randn(3, 2), g.randn(4, 2), 1.0), ref=lambda a, b, p: _pairwise_ref(a, b, p), desc="p=1"),
        Sample((g.randn(3, 2), g.randn(4, 2), 3.0), ref=lambda a, b, p: _pairwise_ref(a, b, p), desc="p=3"),
        Sample((g.distinct(3, 2), g.distinct(2, 2) + 5, float("inf")), ref=lambda a, b, p: _pairwise_ref(a, b, p),
               desc="p=inf"),
        Sample((empty(0, 2), g.randn(3, 2)), ref=lambda a, b: np.zeros((0, 3))),
        Sample((g.randn(2), g.randn(2)), raises=RuntimeError, desc="1-D"),
        Sample((scalar(1.0), g.randn(2, 2)), raises=RuntimeError, desc="0-d"),
        Sample((g.randn(3, 2), g.randn(3, 3)), raises=RuntimeError, desc="columns differ"),
        Sample((g.ints(3, 2), g.ints(3, 2)), raises=RuntimeError, desc="integer input"),
    ]


def _pdist(g):
    def ref(a, p=2.0):
        i, j = np.triu_indices(a.shape[0], 1)
        return _pairwise_ref(a[i][:, None], a[j][:, None], p).reshape(-1)
    return [
        Sample((g.randn(4, 3),), ref=ref),
        Sample((g.randn(4, 3), 1.0), ref=ref, desc="p=1"),
        Sample((g.randn(1, 3),), ref=ref, desc="one row: no pairs"),
        Sample((empty(3, 0),), ref=ref, desc="no columns"),
        Sample((scalar(1.0),), raises=RuntimeError, desc="0-d"),
        Sample((g.ints(3, 2),), raises=RuntimeError, desc="integer input"),
    ]


def _dist(g):
    return [
        Sample((g.randn(3, 2), g.randn(3, 2)), ref=lambda a, b: np.linalg.norm((a - b).ravel())),
        Sample((g.randn(3, 2), g.randn(2), 3), ref=lambda a, b, p: np.sum(np.abs(a - b) ** 3) ** (1 / 3),
               desc="p=3, broadcast"),
        Sample((scalar(1.0), scalar(-2.0)), ref=lambda a, b: np.abs(a - b)),
        Sample((empty(0, 2), g.randn(2)), ref=lambda a, b: np.asarray(0.0)),
        Sample((g.ints(3), g.ints(3)), raises=RuntimeError, desc="integer input"),
    ]


SAMPLES.update(cdist=_cdist, pdist=_pdist, dist=_dist)
