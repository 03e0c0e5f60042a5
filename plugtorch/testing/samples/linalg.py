"""Samples for matrix products: matmul's rank rules, mm, bmm, dot, outer, einsum."""
from __future__ import annotations

from ._common import Sample, empty, np, scalar

SAMPLES: dict = {}


def _matmul(g):
    return [
        Sample((g.randn(2, 3), g.randn(3, 4)), ref=np.matmul),
        Sample((g.randn(3), g.randn(3)), ref=np.matmul, desc="1-D @ 1-D is a 0-d dot"),
        Sample((g.randn(3), g.randn(3, 2)), ref=np.matmul, desc="1-D @ 2-D"),
        Sample((g.randn(2, 3), g.randn(3)), ref=np.matmul, desc="2-D @ 1-D"),
        Sample((g.randn(2, 2, 3), g.randn(3, 2)), ref=np.matmul, desc="batched @ 2-D"),
        Sample((g.randn(2, 1, 2, 3), g.randn(3, 3, 1)), ref=np.matmul, desc="broadcast batch dims"),
        Sample((g.randn(3), g.randn(2, 3, 2)), ref=np.matmul, desc="1-D @ batched"),
        Sample((empty(0, 3), g.randn(3, 2)), ref=np.matmul, desc="empty rows"),
        Sample((empty(2, 0), empty(0, 3)), ref=np.matmul, desc="empty inner dim gives zeros"),
        Sample((scalar(1.0), g.randn(3)), raises=RuntimeError, desc="0-d operand"),
        Sample((g.randn(2, 3), g.randn(2, 3)), raises=RuntimeError, desc="inner sizes differ"),
    ]


def _mm(g):
    return [
        Sample((g.randn(2, 3), g.randn(3, 4)), ref=np.matmul),
        Sample((empty(0, 3), g.randn(3, 2)), ref=np.matmul),
        Sample((g.randn(3), g.randn(3, 2)), raises=RuntimeError, desc="1-D operand"),
        Sample((scalar(1.0), g.randn(3, 2)), raises=RuntimeError, desc="0-d operand"),
    ]


def _bmm(g):
    return [
        Sample((g.randn(2, 2, 3), g.randn(2, 3, 2)), ref=np.matmul),
        Sample((empty(0, 2, 3), empty(0, 3, 1)), ref=np.matmul),
        Sample((g.randn(2, 2, 3), g.randn(3, 3, 2)), raises=RuntimeError, desc="batch sizes differ"),
        Sample((scalar(1.0), g.randn(1, 1, 1)), raises=RuntimeError, desc="0-d operand"),
    ]


def _dot(g):
    return [
        Sample((g.randn(4), g.randn(4)), ref=np.dot),
        Sample((empty(0), empty(0)), ref=lambda a, b: np.asarray(0.0)),
        Sample((scalar(1.0), scalar(2.0)), raises=RuntimeError, desc="0-d operands"),
        Sample((g.randn(2, 2), g.randn(2, 2)), raises=RuntimeError, desc="2-D operands"),
    ]


def _outer(g):
    return [
        Sample((g.randn(3), g.randn(2)), ref=np.outer),
        Sample((empty(0), g.randn(2)), ref=np.outer),
        Sample((g.ints(2), g.ints(3)), grad=False, ref=np.outer, desc="int64"),
        Sample((scalar(1.0), g.randn(2)), raises=RuntimeError, desc="0-d operand"),
    ]


def _einsum(g):
    def es(eq):
        return lambda m, *xs: m.einsum(eq, *xs)

    def ref(eq):
        return lambda *xs: np.einsum(eq, *xs)
    cases = [
        ("ij,jk->ik", [(2, 3), (3, 2)], "matrix product"),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)], "batched"),
        ("ii->i", [(3, 3)], "diagonal"),
        ("ii", [(3, 3)], "trace (implicit output)"),
        ("ij->ji", [(2, 3)], "transpose"),
        ("i,j->ij", [(3,), (2,)], "outer"),
        ("bi,bi->b", [(3, 2), (3, 2)], "row dots"),
        ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)], "ellipsis broadcasts"),
        ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)], "three operands"),
        ("ijk->", [(2, 0, 3)], "empty sums to 0"),
        ("i,i->", [(0,), (0,)], "empty dot"),
        ("", [()], "0-d identity"),
        (",i->i", [(), (3,)], "0-d scales"),
    ]
    out = [Sample(tuple(g.randn(*s) for s in shapes), call=es(eq), ref=ref(eq), desc=desc)
           for eq, shapes, desc in cases]
    out.append(Sample((g.randn(2, 3), g.randn(2, 3)), call=es("ij,jk->ik"), raises=RuntimeError,
                      desc="sizes disagree"))
    out.append(Sample((g.randn(2, 3),), call=es("ijk->i"), raises=RuntimeError, desc="too many subscripts"))
    return out


def _diagonal(g):
    x = g.randn(3, 4)
    return [
        Sample((x,), ref=np.diagonal),
        Sample((x, 1), ref=lambda a, o: np.diagonal(a, o)),
        Sample((x, -2), ref=lambda a, o: np.diagonal(a, o)),
        Sample((x, 5), ref=lambda a, o: np.diagonal(a, o), desc="offset past the edge"),
        Sample((g.randn(2, 3, 3), 0, 1, 2), ref=lambda a, o, d1, d2: np.diagonal(a, o, d1, d2), desc="batched"),
        Sample((empty(0, 3),), ref=np.diagonal),
        Sample((scalar(1.0),), raises=RuntimeError, desc="0-d"),
        Sample((x, 0, 1, 1), raises=RuntimeError, desc="identical dims"),
    ]


def _diag(g):
    return [
        Sample((g.randn(3),), ref=np.diag),
        Sample((g.randn(3), 1), ref=lambda a, k: np.diag(a, k)),
        Sample((g.randn(2), -2), ref=lambda a, k: np.diag(a, k)),
        Sample((g.randn(3, 4), 1), ref=lambda a, k: np.diag(a, k), desc="2-D: the diagonal"),
        Sample((empty(0),), ref=np.diag),
        Sample((scalar(1.0),), raises=RuntimeError, desc="0-d"),
    ]


def _trace(g):
    return [
        Sample((g.randn(3, 3),), ref=np.trace),
        Sample((g.randn(2, 4),), ref=np.trace, desc="rectangular"),
        Sample((empty(0, 2),), ref=lambda a: np.asarray(0.0)),
        Sample((scalar(1.0),), raises=RuntimeError, desc="0-d"),
    ]


def _addmm(g):
    return [
        Sample((g.randn(2, 4), g.randn(2, 3), g.randn(3, 4)), ref=lambda c, a, b: c + a @ b),
        Sample((g.randn(4), g.randn(2, 3), g.randn(3, 4)), ref=lambda c, a, b: c + a @ b, desc="bias broadcasts"),
        Sample((g.randn(2, 4), g.randn(2, 3), g.randn(3, 4)), kwargs={"beta": 0.5, "alpha": 2.0},
               ref=lambda c, a, b: 0.5 * c + 2 * a @ b, desc="beta, alpha"),
        Sample((scalar(1.0), g.randn(2, 3), g.randn(3, 2)), ref=lambda c, a, b: c + a @ b, desc="0-d input"),
        Sample((empty(0, 4), empty(0, 3), g.randn(3, 4)), ref=lambda c, a, b: c + a @ b),
        Sample((g.randn(3), g.randn(2, 3), g.randn(3, 4)), raises=RuntimeError, desc="input does not broadcast"),
    ]


SAMPLES.update(diagonal=_diagonal, diag=_diag, trace=_trace, addmm=_addmm)
SAMPLES.update(matmul=_matmul, mm=_mm, bmm=_bmm, dot=_dot, outer=_outer, einsum=_einsum)
