"""Sparse COO tensors against PyTorch: construction, coalescing (duplicates summed), conversions,
products and their gradients in the values and the dense operand, sums, softmax, the printed
form, and the errors (torch's messages where torch checks; dense ops refuse by name)."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch

torch = pytest.importorskip("torch", reason="PyTorch is the reference these tests compare with")
pytestmark = [pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning"),
              pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")]

# entries of a 4 x 5 matrix, (1, 2) and (3, 0) given twice: coalescing must sum them
IDX = np.array([[1, 0, 3, 1, 2, 3, 0], [2, 4, 0, 2, 1, 0, 3]])
VALS = np.array([1.5, -2.0, 3.0, 0.25, 4.0, -1.0, 0.5], dtype=np.float32)


def both(indices=IDX, values=VALS, size=(4, 5), dtype=None, **kw):
    """The same sparse tensor in plugtorch and in torch (``dtype`` by name)."""
    sized = () if size is None else (size,)
    ours = plugtorch.sparse_coo_tensor(plugtorch.tensor(indices), plugtorch.tensor(values), *sized,
                                       dtype=dtype and getattr(plugtorch, dtype), **kw)
    ref = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), *sized,
                                  dtype=dtype and getattr(torch, dtype), **kw)
    return ours, ref


def close(ours, ref, **kw):
    ours = ours.to_dense() if ours.is_sparse else ours
    ref = ref.to_dense() if ref.is_sparse else ref
    np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), **{"rtol": 1e-6, **kw})


def test_construction_and_metadata():
    s, r = both()
    assert isinstance(s, plugtorch.Tensor) and s.is_sparse and s.layout is plugtorch.sparse_coo
    assert plugtorch.ones(2).layout is plugtorch.strided and not plugtorch.ones(2).is_sparse
    assert tuple(s.shape) == tuple(r.shape) and s.size(1) == 5 and s.dim() == 2 and len(s) == 4
    assert (s.sparse_dim(), s.dense_dim(), s._nnz()) == (r.sparse_dim(), r.dense_dim(), r._nnz())
    assert s.is_coalesced() is r.is_coalesced() is False
    assert s.dtype is plugtorch.float32
    close(s, r)
    np.testing.assert_array_equal(s._indices().numpy(), r._indices().numpy())
    # the size inferred from the indices; dtype= casts the values
    s, r = both(size=None, dtype="float64")
    assert tuple(s.shape) == tuple(r.shape) == (4, 5) and s.dtype is plugtorch.float64
    assert both(is_coalesced=True)[0].is_coalesced()


def test_coalesce_sums_duplicates():
    s, r = both()
    c, rc = s.coalesce(), r.coalesce()
    assert c.is_coalesced() and c._nnz() == rc._nnz() == 5
    np.testing.assert_array_equal(c.indices().numpy(), rc.indices().numpy())
    np.testing.assert_allclose(c.values().numpy(), rc.values().numpy())
    # hybrid: 2 sparse dims and a dense one, int64 values
    vals = np.arange(14).reshape(7, 2)
    s, r = both(values=vals, size=(4, 5, 2))
    c, rc = s.coalesce(), r.coalesce()
    assert (c.sparse_dim(), c.dense_dim()) == (2, 1) and c.dtype is plugtorch.int64
    np.testing.assert_array_equal(c.indices().numpy(), rc.indices().numpy())
    np.testing.assert_array_equal(c.values().numpy(), rc.values().numpy())
    close(s, r)


def test_to_sparse_from_dense():
    d = np.array([[0, 1.5, 0], [2, 0, 0], [0, 0, 0], [0, -3, 4]], dtype=np.float32)
    s, r = plugtorch.tensor(d).to_sparse(), torch.tensor(d).to_sparse()
    assert s.is_coalesced() and r.is_coalesced()
    np.testing.assert_array_equal(s.indices().numpy(), r.indices().numpy())
    np.testing.assert_array_equal(s.values().numpy(), r.values().numpy())
    s, r = plugtorch.tensor(d).to_sparse(1), torch.tensor(d).to_sparse(1)  # rows with a nonzero
    np.testing.assert_array_equal(s.indices().numpy(), r.indices().numpy())
    np.testing.assert_array_equal(s.values().numpy(), r.values().numpy())
    assert plugtorch.tensor(d).to_sparse_coo().to_dense().tolist() == d.tolist()
    # the values index the dense tensor: its gradient comes back through them
    x, y = plugtorch.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    (x.to_sparse().values() * 3).sum().backward()
    (y.to_sparse().values() * 3).sum().backward()
    close(x.grad, y.grad)


def _product(lib, form, s, d):
    if form == "addmm":
        return lib.sparse.addmm(lib.ones(4, 3), s, d, beta=0.5, alpha=2.0)
    if form == "@":
        return s @ d
    return {"sparse.mm": lib.sparse.mm, "mm": lib.mm, "matmul": lib.matmul, "spmm": lib.spmm}[form](s, d)


@pytest.mark.parametrize("form", ["sparse.mm", "mm", "matmul", "@", "spmm", "addmm"])
def test_sparse_dense_product_and_gradients(form):
    rng = np.random.default_rng(1)
    dense = rng.standard_normal((5, 3)).astype(np.float32)
    res = []
    for lib in (plugtorch, torch):
        v = lib.tensor(VALS, requires_grad=True)
        d = lib.tensor(dense, requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(IDX), v, (4, 5))
        out = _product(lib, form, s, d)
        assert not out.is_sparse
        (out * lib.arange(12.0).reshape(4, 3)).sum().backward()
        res.append((out, v.grad, d.grad))
    for a, b in zip(*res):
        close(a, b, atol=1e-5)


def test_dense_sparse_products_and_vectors():
    s, r = both()
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    v5, v4 = np.arange(5.0, dtype=np.float32), np.arange(4.0, dtype=np.float32)
    close(plugtorch.tensor(a) @ s, torch.tensor(a) @ r, atol=1e-5)
    close(plugtorch.mm(plugtorch.tensor(a), s), torch.mm(torch.tensor(a), r), atol=1e-5)
    close(s @ plugtorch.tensor(v5), r @ torch.tensor(v5))
    close(plugtorch.tensor(v4) @ s, torch.tensor(v4) @ r)
    # sparse @ sparse stays sparse
    out, ref = plugtorch.sparse.mm(s, s.t()), torch.sparse.mm(r, r.t())
    assert out.is_sparse and ref.is_sparse
    close(out, ref)


def test_transpose_sum_add_and_scale():
    s, r = both()
    close(s.t(), r.t())
    close(s.transpose(0, 1), r.transpose(0, 1))
    assert tuple(s.t().shape) == (5, 4) and not s.t().is_coalesced()
    close(plugtorch.sparse.sum(s), torch.sparse.sum(r))
    for dim in (0, 1, -1, (0, 1)):
        out, ref = plugtorch.sparse.sum(s, dim=dim), torch.sparse.sum(r, dim=dim)
        assert out.is_sparse == ref.is_sparse
        close(out, ref)
        close(s.sum(dim), r.sum(dim))
    close(s.sum(), r.sum())
    hs, hr = both(values=np.arange(14.0).reshape(7, 2), size=(4, 5, 2))
    for dim in (2, (0, 2), 1):
        close(plugtorch.sparse.sum(hs, dim=dim), torch.sparse.sum(hr, dim=dim))
    total, ref_total = s + s.coalesce(), r + r.coalesce()
    assert total.is_sparse
    close(total, ref_total)
    assert (s.coalesce() + s.coalesce()).is_coalesced() == (r.coalesce() + r.coalesce()).is_coalesced()
    eye, teye = plugtorch.eye(4, 5), torch.eye(4, 5)
    close(eye + s, teye + r)
    for op in ("__add__", "__sub__"):  # torch adds a sparse tensor to a dense one, not the reverse
        assert _message(getattr(s, op), eye) == _message(getattr(r, op), teye)
    close(s * 2.5, r * 2.5)
    close(-s, -r)
    # the example's adjacency: int64 entries added to a float identity make a float matrix
    i = np.array([[0, 1, 1], [1, 0, 2]])
    adj = plugtorch.sparse_coo_tensor(i, plugtorch.ones(3), (3, 3), dtype=plugtorch.int64)
    tadj = torch.sparse_coo_tensor(i, torch.ones(3), (3, 3), dtype=torch.int64)
    out = plugtorch.eye(3) + adj
    assert out.dtype is plugtorch.float32 and not out.is_sparse
    close(out, torch.eye(3) + tadj)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_sparse_softmax(name, dim):
    res = []
    for lib in (plugtorch, torch):
        v = lib.tensor(VALS, requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(IDX), v, (4, 5))
        out = getattr(lib.sparse, name)(s, dim)
        assert out.is_sparse
        out = out.coalesce()
        (out.values() * lib.arange(5.0)).sum().backward()
        res.append((out.indices(), out.values(), v.grad))
    for a, b in zip(*res):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_leaf_requires_grad_and_values_gradient():
    # requires_grad=True makes the sparse tensor a leaf: its .grad is sparse
    res = []
    for lib in (plugtorch, torch):
        s = lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS), (4, 5), requires_grad=True)
        assert s.requires_grad and s.is_leaf
        (lib.sparse.mm(s, lib.ones(5, 2)) ** 2).sum().backward()
        assert s.grad.is_sparse
        res.append(s.grad)
    close(res[0], res[1])


def test_repr_as_torch():
    s, r = both()
    assert repr(s) == repr(r).replace("torch.", "plugtorch.")
    # the longer module name may move a suffix to the next line: compare the words
    s, r = both(dtype="float64")
    assert repr(s).split() == repr(r).replace("torch.", "plugtorch.").split()
    s, r = both(values=np.arange(7), size=(4, 5))
    assert repr(s) == repr(r).replace("torch.", "plugtorch.")
    e = plugtorch.sparse_coo_tensor(plugtorch.zeros(2, 0, dtype=plugtorch.int64), plugtorch.zeros(0), (2, 2))
    te = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 2))
    assert repr(e) == repr(te).replace("torch.", "plugtorch.")
    s = plugtorch.tensor([[0.0, 1.0]]).to_sparse().requires_grad_()
    assert repr(s).endswith("requires_grad=True)")


def _message(fn, *args):
    with pytest.raises((RuntimeError, NotImplementedError, TypeError)) as info:
        fn(*args)
    return str(info.value)


@pytest.mark.parametrize("case", [
    lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS), (2, 5), check_invariants=True),
    lambda lib: lib.sparse_coo_tensor(lib.tensor([[0, -1]]), lib.ones(2), (3,), check_invariants=True),
    lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX), lib.ones(3), (4, 5)),
    lambda lib: lib.sparse_coo_tensor(lib.tensor([[0, 1]]), lib.ones(2), (2, 3)),
    lambda lib: lib.sparse.mm(lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS), (4, 5)), lib.ones(3, 2)),
    lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS), (4, 5)).indices(),
    lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS), (4, 5)).values(),
    lambda lib: lib.ones(2, 2).coalesce(),
    lambda lib: lib.ones(2, 2).is_coalesced(),
    lambda lib: lib.ones(2, 2).indices(),
    lambda lib: lib.ones(2, 2).values(),
], ids=["index-too-large", "negative-index", "nnz-mismatch", "size-rank", "mm-shapes", "uncoalesced-indices",
        "uncoalesced-values", "dense-coalesce", "dense-is-coalesced", "dense-indices", "dense-values"])
def test_errors_as_torch(case):
    ref = _message(lambda: case(torch))
    ours = _message(lambda: case(plugtorch))
    assert ours == ref.replace("torch.", "plugtorch.")


def test_mm_dtype_mismatch_names_both_types():
    s, r = both(values=np.arange(7), size=(4, 5))
    assert _message(lambda: plugtorch.sparse.mm(s, plugtorch.ones(5, 2))) == \
        _message(lambda: torch.sparse.mm(r, torch.ones(5, 2)))


@pytest.mark.parametrize("op, call", [
    ("exp", lambda s: plugtorch.exp(s)),
    ("relu", lambda s: plugtorch.nn.functional.relu(s)),
    ("view", lambda s: s.view(20)),
    ("sum", lambda s: plugtorch.sum(s)),
    ("cat", lambda s: plugtorch.cat([s, s])),
    ("softmax", lambda s: plugtorch.softmax(s, 0)),
    ("add", lambda s: plugtorch.add(plugtorch.ones(4, 5), s)),
    ("eq", lambda s: s == s),
])
def test_dense_ops_refuse_sparse_tensors_by_name(op, call):
    s = both()[0]
    msg = _message(lambda: call(s))
    assert msg.startswith(f"{op} does not support sparse tensors") and ".to_dense()" in msg
    assert "dense host copy" in _message(lambda: s.numpy())
