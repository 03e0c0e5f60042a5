"""Samples for matrix products: matmul's rank rules, mm, bmm, dot, outer, einsum."""
from __future__ import annotations

from ._common import F, Sample, Waiver, empty, np, scalar

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
    cases: list[tuple[str, list[tuple[int, ...]], str]] = [
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


def _linear(g):
    def call(m, x, w, *b):
        return F(m).linear(x, w, *b)

    def ref(x, w, b=None):
        return x @ w.T + (0 if b is None else b)
    return [
        Sample((g.randn(4, 3), g.randn(2, 3), g.randn(2)), call=call, ref=ref),
        Sample((g.randn(4, 3), g.randn(2, 3)), call=call, ref=ref, desc="no bias"),
        Sample((g.randn(2, 3, 4), g.randn(5, 4), g.randn(5)), call=call, ref=ref, desc="batch dims"),
        Sample((g.randn(3), g.randn(2, 3), g.randn(2)), call=call, ref=ref, desc="1-D input"),
        Sample((empty(0, 3), g.randn(2, 3), g.randn(2)), call=call, ref=ref, desc="empty batch"),
        Sample((g.randn(4, 3), g.randn(2, 3), g.randn(1)), call=call, ref=ref,
               desc="a bias that broadcasts (matmul and add)"),
        Sample((g.randn(4, 3), g.randn(3)), call=call, ref=lambda x, w: x @ w, desc="1-D weight (matmul)"),
        Sample((g.randn(4, 3), g.randn(2, 4)), call=call, raises=RuntimeError, desc="in_features differ"),
        Sample((scalar(1.0), g.randn(2, 3)), call=call, raises=RuntimeError, desc="0-d input"),
    ]


SAMPLES.update(diagonal=_diagonal, diag=_diag, trace=_trace, addmm=_addmm, linear=_linear)
SAMPLES.update(matmul=_matmul, mm=_mm, bmm=_bmm, dot=_dot, outer=_outer, einsum=_einsum)


# -- cross product and norms (plugtorch.linalg) ---------------------------------------------------

def _linalg_cross(g):
    def call(m, a, b, *dim):
        return m.linalg.cross(a, b, dim=dim[0]) if dim else m.linalg.cross(a, b)
    return [
        Sample((g.randn(4, 3), g.randn(4, 3)), call=call, ref=lambda a, b: np.cross(a, b)),
        Sample((g.randn(3, 2), g.randn(3, 2), 0), call=call, ref=lambda a, b, d: np.cross(a, b, axis=d),
               desc="dim 0"),
        Sample((g.randn(2, 3), g.randn(1, 3)), call=call, ref=lambda a, b: np.cross(a, b), desc="broadcast"),
        Sample((g.randn(3, 3), g.randn(3, 3)), call=lambda m, a, b: m.cross(a, b, dim=1),
               ref=lambda a, b: np.cross(a, b), desc="torch.cross"),
        Sample((g.ints(2, 3), g.ints(2, 3)), call=call, grad=False, ref=lambda a, b: np.cross(a, b),
               desc="int64"),
        Sample((empty(0, 3), empty(0, 3)), call=call, ref=lambda a, b: np.zeros((0, 3))),
        Sample((g.randn(2, 2), g.randn(2, 2)), call=call, raises=RuntimeError, desc="not 3-vectors"),
        Waiver("zero_dim", "a cross product takes 3-vectors: a 0-d input has none"),
    ]


def _vector_norm(g):
    def call(m, x, *args, **kwargs):
        return m.linalg.vector_norm(x, *args, **kwargs)
    x = g.away(3, 4)
    n = np.linalg.norm
    return [
        Sample((x,), call=call, ref=lambda a: n(a.ravel())),
        Sample((x, 3, 1), call=call, ref=lambda a, p, d: np.sum(np.abs(a) ** 3, axis=d) ** (1 / 3), desc="ord 3"),
        Sample((x, 1, (0, 1), True), call=call, ref=lambda a, p, d, k: np.abs(a).sum(keepdims=True),
               desc="ord 1, keepdim"),
        Sample((g.distinct(3, 4), float("inf"), 0), call=call, ref=lambda a, p, d: np.abs(a).max(axis=d),
               desc="inf"),
        Sample((x, 0, 1), call=call, ref=lambda a, p, d: (a != 0).sum(axis=d).astype(float), desc="ord 0"),
        Sample((scalar(-2.0),), call=call, ref=np.abs),
        Sample((empty(0, 3), 2, 1), call=call, ref=lambda a, p, d: np.zeros(0)),
        Sample((g.ints(3),), call=call, raises=RuntimeError, desc="integer input"),
    ]


def _matrix_norm(g):
    def call(m, x, *args, **kwargs):
        return m.linalg.matrix_norm(x, *args, **kwargs)
    x = g.distinct(3, 4)
    n = np.linalg.norm
    return [
        Sample((g.away(3, 4),), call=call, ref=lambda a: n(a, "fro")),
        Sample((x, 1), call=call, ref=lambda a, o: n(a, 1), desc="ord 1: largest column sum"),
        Sample((x, -1), call=call, ref=lambda a, o: n(a, -1), desc="ord -1"),
        Sample((x, float("inf")), call=call, ref=lambda a, o: n(a, np.inf), desc="ord inf: largest row sum"),
        Sample((x, float("-inf")), call=call, ref=lambda a, o: n(a, -np.inf), desc="ord -inf"),
        Sample((x, 2), call=call, ref=lambda a, o: n(a, 2), desc="ord 2: largest singular value"),
        Sample((g.away(2, 3, 2), "nuc", (2, 0), True), call=call, desc="nuclear, dims, keepdim"),
        Sample((g.away(2, 3, 2), "fro", (0, 2), True), call=call,
               ref=lambda a, o, d, k: np.sqrt((a * a).sum(axis=d, keepdims=True)), desc="dims, keepdim"),
        Sample((empty(0, 3),), call=call, ref=lambda a: np.asarray(0.0)),
        Sample((g.randn(3),), call=call, raises=RuntimeError, desc="1-D input"),
        Waiver("zero_dim", "a matrix norm needs at least 2 dims"),
    ]


SAMPLES.update(linalg_cross=_linalg_cross, linalg_vector_norm=_vector_norm,
               linalg_matrix_norm=_matrix_norm)


# -- tensordot, kron, inner, mv, vdot, the add* products, matrix_power, block_diag --------------

def _tensordot(g):
    td = np.tensordot
    return [
        Sample((g.randn(2, 3, 4), g.randn(3, 4, 2)), ref=td, desc="dims=2"),
        Sample((g.randn(2, 3), g.randn(3, 2)), kwargs={"dims": 1}, ref=lambda a, b: td(a, b, 1)),
        Sample((g.randn(2, 3, 4), g.randn(4, 3, 2)), kwargs={"dims": ([1, 2], [1, 0])},
               ref=lambda a, b: td(a, b, ([1, 2], [1, 0])), desc="dim lists"),
        Sample((g.randn(2), g.randn(3)), kwargs={"dims": 0}, ref=lambda a, b: td(a, b, 0), desc="outer"),
        Sample((scalar(2.0), g.randn(3)), kwargs={"dims": 0}, ref=lambda a, b: td(a, b, 0), desc="0-d"),
        Sample((empty(0, 3), g.randn(3, 2)), kwargs={"dims": 1}, ref=lambda a, b: td(a, b, 1)),
        Sample((g.randn(2, 3), g.randn(2, 3)), kwargs={"dims": 1}, raises=RuntimeError, desc="sizes differ"),
        Sample((g.randn(2, 3), g.randn(3, 2)), kwargs={"dims": -1}, raises=RuntimeError, desc="negative dims"),
    ]


def _kron(g):
    return [
        Sample((g.randn(2, 3), g.randn(2, 2)), ref=np.kron),
        Sample((g.randn(2, 3), g.randn(2)), ref=np.kron, desc="ranks differ"),
        Sample((scalar(2.0), g.randn(3)), ref=np.kron, desc="0-d"),
        Sample((empty(0, 2), g.randn(2, 2)), ref=np.kron),
        Sample((g.ints(2, 2), g.ints(2)), grad=False, ref=np.kron, desc="int64"),
    ]


def _inner(g):
    return [
        Sample((g.randn(2, 3), g.randn(4, 3)), ref=np.inner),
        Sample((g.randn(3), g.randn(3)), ref=np.inner, desc="1-D"),
        Sample((scalar(2.0), g.randn(2, 3)), ref=np.inner, desc="0-d scales"),
        Sample((empty(0, 3), g.randn(2, 3)), ref=np.inner),
        Sample((g.randn(2), g.randn(3)), raises=RuntimeError, desc="last dims differ"),
    ]


def _mv(g):
    return [
        Sample((g.randn(2, 3), g.randn(3)), ref=np.matmul),
        Sample((empty(0, 3), g.randn(3)), ref=np.matmul),
        Sample((g.randn(2, 3), g.randn(2)), raises=RuntimeError, desc="sizes differ"),
        Sample((scalar(1.0), g.randn(3)), raises=RuntimeError, desc="0-d"),
    ]


def _vdot(g):
    return [
        Sample((g.randn(4), g.randn(4)), ref=np.vdot),
        Sample((empty(0), empty(0)), ref=lambda a, b: np.asarray(0.0)),
        Sample((scalar(1.0), scalar(2.0)), raises=RuntimeError, desc="0-d operands"),
    ]


def _add_product(prod, shapes, bad, zero_dim_input):
    def samples(g):
        def ref(c, a, b):
            return c + prod(a, b)

        def scaled(c, a, b):
            return 0.5 * c + 2.0 * prod(a, b)
        args = tuple(g.randn(*s) for s in shapes)
        return [
            Sample(args, ref=ref),
            Sample(tuple(g.randn(*s) for s in shapes), kwargs={"beta": 0.5, "alpha": 2.0},
                   ref=scaled, desc="beta, alpha"),
            Sample((scalar(1.0),) + args[1:], ref=ref, desc="0-d input broadcasts"),
            Sample((np.full(shapes[0], np.nan),) + args[1:], kwargs={"beta": 0},
                   ref=lambda c, a, b: prod(a, b), grad=False, desc="beta=0 ignores input's nan"),
            Sample(zero_dim_input, ref=ref, desc="empty"),
            Sample(tuple(g.randn(*s) for s in bad), raises=RuntimeError, desc="sizes differ"),
        ]
    return samples


def _bmm_sum(a, b):
    return np.matmul(a, b).sum(0)


def _matrix_power(g):
    def mp(a, n):
        return np.linalg.matrix_power(a, n)
    return [
        Sample((g.randn(3, 3), 3), ref=mp),
        Sample((g.randn(2, 3, 3), 2), ref=mp, desc="batched"),
        Sample((g.randn(3, 3), 1), ref=mp, desc="n=1 copies"),
        Sample((g.randn(2, 2), 0), ref=mp, desc="n=0: identity"),
        Sample((empty(0, 2, 2), 2), ref=mp),
        Sample((g.randn(2, 3), 2), raises=RuntimeError, desc="not square"),
        Sample((scalar(1.0), 2), raises=RuntimeError, desc="0-d"),
    ]


def _block_diag(g):
    def call(m, *ts):
        return m.block_diag(*ts)

    def ref(*ts):
        blocks = [np.atleast_2d(t) for t in ts]
        out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
        r = c = 0
        for b in blocks:
            out[r:r + b.shape[0], c:c + b.shape[1]] = b
            r, c = r + b.shape[0], c + b.shape[1]
        return out
    return [
        Sample((g.randn(2, 3), g.randn(1, 2)), call=call, ref=ref),
        Sample((g.randn(2, 2), g.randn(3), scalar(2.0)), call=call, ref=ref, desc="1-D and 0-d blocks"),
        Sample((empty(0, 2), g.randn(2, 1)), call=call, ref=ref, desc="empty block"),
        Sample((g.randn(2, 2, 2),), call=call, raises=RuntimeError, desc="3-D block"),
    ]


SAMPLES.update(tensordot=_tensordot, kron=_kron, inner=_inner, mv=_mv, vdot=_vdot, matrix_power=_matrix_power,
               block_diag=_block_diag,
               baddbmm=_add_product(np.matmul, [(2, 2, 4), (2, 2, 3), (2, 3, 4)], [(2, 2, 4), (2, 2, 3), (3, 3, 4)],
                                    (empty(0, 2, 4), empty(0, 2, 3), empty(0, 3, 4))),
               addbmm=_add_product(_bmm_sum, [(2, 4), (3, 2, 3), (3, 3, 4)], [(2, 4), (3, 2, 3), (3, 2, 4)],
                                   (empty(2, 4), empty(0, 2, 3), empty(0, 3, 4))),
               addmv=_add_product(np.matmul, [(2,), (2, 3), (3,)], [(2,), (2, 3), (2,)],
                                  (empty(0), empty(0, 3), np.ones(3))),
               addr=_add_product(np.outer, [(2, 3), (2,), (3,)], [(2, 3), (2, 2), (3,)],
                                 (empty(0, 3), empty(0), np.ones(3))))
