"""Small torch API gaps that real scripts and external op suites hit, each
differential against torch: randint's overloads, F.pad's negative widths, scatter's dtype
check, uint8 interpolation, the legacy tensor types, the device predicates, index_put and
the deprecated input ranks of dropout2d/3d."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F


def _np(t):
    return np.asarray(t.detach().tolist() if hasattr(t, "detach") else t)


def _same_error(ours, theirs, exact=True):
    """Both calls raise the same exception type; with ``exact``, the same message."""
    with pytest.raises(Exception) as t_err:
        theirs()
    with pytest.raises(type(t_err.value)) as p_err:
        ours()
    if exact:
        assert str(p_err.value) == str(t_err.value)


# -- randint / randint_like ----------------------------------------------------------------

RANDINT_CALLS = [  # (args, kwargs, the range [low, high) drawn from)
    ((10, (3,)), {}, (0, 10)),
    ((2, 10, (3, 2)), {}, (2, 10)),
    ((), {"low": 0, "high": 10, "size": (3,)}, (0, 10)),
    ((), {"high": 10, "size": [2, 2]}, (0, 10)),
    ((10,), {"size": (4,)}, (0, 10)),
    ((2,), {"high": 10, "size": (4,)}, (2, 10)),
    ((-5, 5, (7,)), {}, (-5, 5)),
    ((10, (3,)), {"dtype": "float32", "requires_grad": True}, (0, 10)),
    ((10, (3,)), {"dtype": "int32", "device": "cpu"}, (0, 10)),
    ((2, (5,)), {"dtype": "bool"}, (0, 2)),
    ((250, 256, (5,)), {"dtype": "uint8"}, (250, 256)),
    ((10, ()), {"dtype": "float64"}, (0, 10)),
    ((10, (0, 3)), {}, (0, 10)),
]


@pytest.mark.parametrize("args, kwargs, bounds", RANDINT_CALLS)
def test_randint_overloads(torch, args, kwargs, bounds):
    def call(lib):
        kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
        return lib.randint(*args, **kw)
    ours, theirs = call(plugtorch), call(torch)
    assert list(ours.shape) == list(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours.requires_grad == theirs.requires_grad
    values = _np(ours).astype(np.int64)
    assert ((values >= bounds[0]) & (values < bounds[1])).all()
    np.testing.assert_array_equal(values, _np(ours))  # whole numbers in float dtypes too


def test_randint_covers_its_range_and_follows_its_generator():
    g1, g2 = plugtorch.Generator().manual_seed(7), plugtorch.Generator().manual_seed(7)
    a = plugtorch.randint(3, 8, (2000,), generator=g1)
    b = plugtorch.randint(low=3, high=8, size=(2000,), generator=g2)
    assert a.tolist() == b.tolist()
    assert sorted(set(a.tolist())) == [3, 4, 5, 6, 7]


@pytest.mark.parametrize("args, kwargs", [
    ((10, 10, (3,)), {}),
    ((0, (3,)), {}),
    ((10, 2, (3,)), {}),
    ((10.5, (3,)), {}),
    ((True, (3,)), {}),
    ((10, (-1,)), {}),
    ((300, (3,)), {"dtype": "uint8"}),
    ((-3, 3, (3,)), {"dtype": "uint8"}),
    ((10, (3,)), {"dtype": "bool"}),
    ((-200, 3, (3,)), {"dtype": "int8"}),
    ((-70000, 3, (3,)), {"dtype": "float16"}),
])
def test_randint_errors_as_torch(torch, args, kwargs):
    def call(lib):
        kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
        return lambda: lib.randint(*args, **kw)
    _same_error(call(plugtorch), call(torch))


@pytest.mark.parametrize("args, kwargs", [((10,), {}), ((), {"high": 10}), ((), {"low": 1, "size": (3,)}),
                                          ((10, 3), {}), ((1, 10, 3), {})])
def test_randint_missing_or_wrong_arguments_are_type_errors(torch, args, kwargs):
    _same_error(lambda: plugtorch.randint(*args, **kwargs), lambda: torch.randint(*args, **kwargs), exact=False)


def test_randint_integer_dtype_cannot_require_grad(torch):
    _same_error(lambda: plugtorch.randint(10, (3,), dtype=plugtorch.int64, requires_grad=True),
                lambda: torch.randint(10, (3,), dtype=torch.int64, requires_grad=True), exact=False)


def test_randint_float_precision_warning_as_torch(torch):
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        torch.randint(0, 2 ** 24 + 2, (2,), dtype=torch.float32)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        plugtorch.randint(0, 2 ** 24 + 2, (2,), dtype=plugtorch.float32)
    strip = re.compile(r" \(Triggered internally at .*\)$", re.S)
    assert [strip.sub("", str(w.message)) for w in theirs] == [str(w.message) for w in ours]
    assert all(w.category is UserWarning for w in ours)


@pytest.mark.parametrize("args, kwargs", [
    ((10,), {}), ((2, 10), {}), ((), {"low": 2, "high": 10}), ((), {"high": 10}),
    ((10,), {"dtype": "int64"}), ((2, 10), {"requires_grad": True}),
])
def test_randint_like(torch, args, kwargs):
    x = np.zeros((2, 3), np.float32)

    def call(lib):
        kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
        return lib.randint_like(lib.tensor(x), *args, **kw)
    ours, theirs = call(plugtorch), call(torch)
    assert list(ours.shape) == list(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours.requires_grad == theirs.requires_grad
    hi = kwargs.get("high", args[-1] if args else None)
    lo = kwargs.get("low", args[0] if len(args) == 2 else 0)
    assert ((_np(ours) >= lo) & (_np(ours) < hi)).all()
    assert float(ours.detach().sum()) == float(np.floor(_np(ours)).sum())  # whole numbers


def test_randint_like_errors_as_torch(torch):
    _same_error(lambda: plugtorch.randint_like(plugtorch.zeros(2), 5, 5),
                lambda: torch.randint_like(torch.zeros(2), 5, 5))
    _same_error(lambda: plugtorch.randint_like(plugtorch.zeros(2, dtype=plugtorch.uint8), 300),
                lambda: torch.randint_like(torch.zeros(2, dtype=torch.uint8), 300))
    _same_error(lambda: plugtorch.randint_like(plugtorch.zeros(2)), lambda: torch.randint_like(torch.zeros(2)),
                exact=False)


# -- F.pad with negative widths -----------------------------------------------------------------

def _pad_cases():
    rng = np.random.default_rng(0)
    cases = []
    for mode in ("reflect", "replicate", "circular"):
        for shape in ((2, 3, 5), (1, 2, 4, 6), (1, 1, 3, 4, 5)):
            nd = len(shape) - 2
            found = 0
            while found < 4:
                pad = tuple(int(v) for v in rng.integers(-3, 4, size=2 * nd))
                if not any(p < 0 for p in pad):
                    continue
                widths = [(pad[2 * i], pad[2 * i + 1]) for i in range(nd)]
                sizes = shape[::-1][:nd]
                left = [n - max(-lo, 0) - max(-hi, 0) for (lo, hi), n in zip(widths, sizes)]
                outs = [n + lo + hi for (lo, hi), n in zip(widths, sizes)]
                if mode == "circular" and any(max(lo, hi) > k or k <= 0 for (lo, hi), k in zip(widths, left)):
                    continue  # torch's circular kernel reads memory it never wrote there
                if mode == "reflect" and any(max(w) >= n for w, n in zip(widths, sizes)):
                    continue
                if any(o <= 0 for o in outs):
                    continue  # an empty result: torch leaves its input gradient uninitialised
                cases.append((mode, shape, pad))
                found += 1
    return cases


@pytest.mark.parametrize("mode, shape, pad", _pad_cases())
def test_pad_negative_widths_values_and_gradients(torch, mode, shape, pad):
    x = np.random.default_rng(1).standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    px = plugtorch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.pad(tx, pad, mode=mode)
    py = F.pad(px, pad, mode=mode)
    assert list(py.shape) == list(ty.shape)
    np.testing.assert_allclose(_np(py), ty.detach().numpy())
    g = np.random.default_rng(2).standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(g))
    py.backward(plugtorch.tensor(g))
    np.testing.assert_allclose(_np(px.grad), tx.grad.numpy())


@pytest.mark.parametrize("mode, pad", [("reflect", (-1, 2)), ("reflect", (4, -4)), ("replicate", (7, -5)),
                                       ("replicate", (-3, 3)), ("circular", (-1, 2)), ("circular", (2, -1)),
                                       ("circular", (-2, 3)), ("circular", (-3, -2))])
def test_pad_negative_widths_one_dim(torch, mode, pad):
    x = np.arange(10.0).reshape(1, 2, 5)
    np.testing.assert_array_equal(_np(F.pad(plugtorch.tensor(x), pad, mode=mode)),
                                  torch.nn.functional.pad(torch.tensor(x), pad, mode=mode).numpy())


@pytest.mark.parametrize("mode, shape, pad", [
    ("reflect", (1, 3, 5), (-3, -2)), ("replicate", (3, 5), (-5, -2)), ("reflect", (1, 3, 5), (5, -2)),
    ("reflect", (1, 3, 4, 5), (0, 0, 4, -1)), ("reflect", (1, 1, 3, 4, 5), (0, 0, 0, 0, 3, -1)),
    ("circular", (1, 3, 5), (6, 0)),
])
def test_pad_negative_widths_errors_as_torch(torch, mode, shape, pad):
    x = np.zeros(shape)
    _same_error(lambda: F.pad(plugtorch.tensor(x), pad, mode=mode),
                lambda: torch.nn.functional.pad(torch.tensor(x), pad, mode=mode), exact=mode == "circular")


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_negative_widths_to_an_empty_plane(torch, mode):
    # torch's 2-d and 3-d kernels allow an empty result (its 1-d ones do not)
    x = np.ones((1, 3, 4, 5))
    ours = F.pad(plugtorch.tensor(x, requires_grad=True), (-3, -2, 0, 0), mode=mode)
    assert list(ours.shape) == list(torch.nn.functional.pad(torch.tensor(x), (-3, -2, 0, 0), mode=mode).shape)


# -- scatter family: src of another dtype --------------------------------------------------------

SCATTERS = [
    lambda lib, x, i, s: lib.scatter(x, 0, i, s),
    lambda lib, x, i, s: x.clone().scatter_(0, i, s),
    lambda lib, x, i, s: lib.scatter_add(x, 0, i, s),
    lambda lib, x, i, s: x.clone().scatter_add_(0, i, s),
    lambda lib, x, i, s: lib.scatter_reduce(x, 0, i, s, "sum"),
    lambda lib, x, i, s: x.clone().scatter_reduce_(0, i, s, "amax"),
    lambda lib, x, i, s: lib.scatter(x, 0, i, s, reduce="add"),
    lambda lib, x, i, s: lib.scatter(x.reshape(()), 0, i[0], s[0]),  # 0-d
    lambda lib, x, i, s: lib.scatter_add(x, 0, i[:0], s),  # empty index
    lambda lib, x, i, s: lib.scatter(x, 0, lib.tensor([0, 1, 2, 0, 1]), s),  # also too large an index
]


@pytest.mark.filterwarnings("ignore:The reduce argument")  # scatter(reduce=) with a tensor src: deprecated
@pytest.mark.parametrize("call", SCATTERS)
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float32", "int64"), ("int64", "float32")])
def test_scatter_src_of_another_dtype_is_refused(torch, call, dtypes):
    def run(lib):
        x = lib.zeros(3, dtype=getattr(lib, dtypes[0]))
        return lambda: call(lib, x if call is not SCATTERS[7] else x[:1], lib.tensor([0, 1]),
                            lib.ones(2, dtype=getattr(lib, dtypes[1])))
    with pytest.raises(RuntimeError) as theirs:
        run(torch)()
    with pytest.raises(RuntimeError) as ours:
        run(plugtorch)()
    assert str(ours.value).startswith(str(theirs.value))  # ours goes on with the dtypes and the remedy


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("value", [2, 2.5])
def test_scatter_number_value_is_cast(torch, dtype, value):
    def run(lib):
        x, i = lib.zeros(4, dtype=getattr(lib, dtype)), lib.tensor([0, 2])
        return [lib.scatter(x, 0, i, value), lib.scatter(x, 0, i, value=value), x.clone().scatter_(0, i, value),
                lib.scatter(x, 0, i, value, reduce="add")]
    for ours, theirs in zip(run(plugtorch), run(torch)):
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        np.testing.assert_array_equal(_np(ours), theirs.numpy())


def test_index_add_source_of_another_dtype_is_refused(torch):
    _same_error(lambda: plugtorch.zeros(3).index_add(0, plugtorch.tensor([0, 1]), plugtorch.ones(2).double()),
                lambda: torch.zeros(3).index_add(0, torch.tensor([0, 1]), torch.ones(2).double()))


# -- F.interpolate on uint8 images -----------------------------------------------------------------

def _uint8_cases():
    rng = np.random.default_rng(0)
    cases = []
    for mode in ("nearest", "nearest-exact", "bilinear", "bicubic", "lanczos"):
        for k in range(8):
            aa = mode == "lanczos" or (not mode.startswith("nearest") and k % 2 == 1)
            ac = None if mode.startswith("nearest") else (k % 4 == 2 and mode != "lanczos")
            channels = (1, 3, 4, 6)[k % 4]
            h, w = (int(v) for v in rng.integers(1, 12, 2))
            if k < 5:
                size, scale = tuple(int(v) for v in rng.integers(1, 15, 2)), None
                if channels > 4 and size[1] == 1:
                    size = (size[0], 2)  # torch's generic uint8 kernel repeats row 0 into a width-1 output
            else:
                size, scale = None, (0.5, 1.5, 3.0)[k - 5]
                h, w = max(h, 2), max(w, 2)
            cases.append((mode, (2, channels, h, w), size, scale, ac, aa))
    cases.append(("bilinear", (1, 3, 64, 80), (23, 17), None, None, True))  # a real downscale
    cases.append(("bicubic", (1, 3, 32, 40), (70, 91), None, None, False))
    return cases


@pytest.mark.parametrize("mode, shape, size, scale, align_corners, antialias", _uint8_cases())
def test_interpolate_uint8_as_torch(torch, mode, shape, size, scale, align_corners, antialias):
    x = np.random.default_rng(sum(shape)).integers(0, 256, shape).astype(np.uint8)
    kw = {"size": size, "scale_factor": scale, "mode": mode, "align_corners": align_corners,
          "antialias": antialias}
    theirs = torch.nn.functional.interpolate(torch.tensor(x), **kw)
    ours = F.interpolate(plugtorch.tensor(x), **kw)
    assert ours.dtype is plugtorch.uint8
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("shape, size, mode", [((2, 3, 7), (11,), "nearest"), ((2, 3, 7), (4,), "nearest-exact"),
                                               ((1, 2, 3, 4, 5), (5, 2, 7), "nearest"),
                                               ((1, 2, 3, 4, 5), (2, 6, 3), "nearest-exact")])
def test_interpolate_uint8_nearest_any_rank(torch, shape, size, mode):
    x = np.random.default_rng(0).integers(0, 256, shape).astype(np.uint8)
    np.testing.assert_array_equal(F.interpolate(plugtorch.tensor(x), size=size, mode=mode).numpy(),
                                  torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode).numpy())


@pytest.mark.parametrize("shape, mode", [((1, 3, 7), "linear"), ((1, 1, 3, 4, 5), "trilinear"),
                                         ((1, 3, 5, 7), "area")])
def test_interpolate_uint8_modes_torch_lacks(torch, shape, mode):
    x = np.zeros(shape, np.uint8)
    size = (4,) * (len(shape) - 2)
    _same_error(lambda: F.interpolate(plugtorch.tensor(x), size=size, mode=mode),
                lambda: torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode), exact=False)


# -- legacy tensor types ----------------------------------------------------------------------------

LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
          "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", LEGACY)
@pytest.mark.parametrize("args", [(2, 3), (4,), (), ([1, 0, 1],), ((1, 0),), ([[1, 2], [0, 1]],), ("Size",),
                                  ("ndarray",), ("int64",)])
def test_legacy_constructors(torch, name, args):
    def call(lib):
        made = [lib.Size([2, 3]) if a == "Size" else np.array([1.0, 0.0]) if a == "ndarray"
                else np.int64(3) if a == "int64" else a for a in args]
        return getattr(lib, name)(*made)
    ours, theirs = call(plugtorch), call(torch)
    assert list(ours.shape) == list(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert type(ours) is plugtorch.Tensor
    if not (args and isinstance(args[0], int)) and args[:1] != ("Size",) and args[:1] != ("int64",):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())  # from data; sizes leave it unset


@pytest.mark.parametrize("args, kwargs", [((2.5,), {}), (("a",), {}), ((True,), {}), (([1, 2], [3]), {}),
                                          ((2, 3), {"dtype": "float64"}), (([1, 2],), {"requires_grad": True}),
                                          (("long tensor",), {}), ((-1,), {})])
def test_legacy_constructor_errors(torch, args, kwargs):
    def call(lib):
        made = [lib.tensor([1, 2]) if a == "long tensor" else a for a in args]
        kw = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
        return lambda: lib.FloatTensor(*made, **kw)
    _same_error(call(plugtorch), call(torch), exact=False)


def test_legacy_constructor_of_its_own_dtype_returns_the_tensor(torch):
    x = plugtorch.tensor([1.0, 2.0])
    assert plugtorch.FloatTensor(x) is x
    assert torch.FloatTensor(torch.tensor([1.0, 2.0])).dtype is torch.float32


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                                   "bool"])
def test_legacy_types_in_isinstance_and_type(torch, dtype):
    ours = plugtorch.zeros(2, dtype=getattr(plugtorch, dtype), requires_grad=dtype == "float32")
    theirs = torch.zeros(2, dtype=getattr(torch, dtype), requires_grad=dtype == "float32")
    for name in LEGACY:
        assert isinstance(ours, getattr(plugtorch, name)) == isinstance(theirs, getattr(torch, name)), name
        assert ours.type(getattr(plugtorch, name)).dtype.name == str(theirs.type(getattr(torch, name)).dtype)[6:]
    # the type names are plugtorch's own, as its dtypes' (plugtorch.float32): torch's with its module renamed
    assert ours.type() == theirs.type().replace("torch.", "plugtorch.")
    assert str(type(ours).__mro__[0]) == "<class 'plugtorch.core.tensor.Tensor'>"
    assert isinstance(plugtorch.nn.Parameter(plugtorch.zeros(2)), plugtorch.FloatTensor)


def test_legacy_types_are_no_tensor_subclasses(torch):
    for name in LEGACY:
        assert issubclass(getattr(plugtorch, name), plugtorch.Tensor) == issubclass(getattr(torch, name), torch.Tensor)
        assert str(getattr(plugtorch, name)) == str(getattr(torch, name)).replace("torch.", "plugtorch.")
        assert getattr(plugtorch, name).dtype.name == str(getattr(torch, name).dtype)[6:]
        assert getattr(plugtorch, name).is_cuda is False
    assert not isinstance(np.zeros(2, np.float32), plugtorch.FloatTensor)


# -- device predicates -----------------------------------------------------------------------------

PREDICATES = ["is_cuda", "is_xpu", "is_mps", "is_meta", "is_sparse", "is_quantized", "is_cpu"]


def test_device_predicates_of_a_host_tensor(torch):
    for name in PREDICATES:
        assert getattr(plugtorch.zeros(2), name) is getattr(torch.zeros(2), name), name
        assert isinstance(getattr(plugtorch.Tensor, name), property), name


@pytest.mark.parametrize("kind", ["cuda", "xpu", "mps"])
def test_device_predicates_follow_the_backends_accelerator(kind):
    from plugtorch_backends.numpy_backend import make_backend

    from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl

    backend = make_backend(name=f"fake_{kind}_gaps", aliases=(), host_memory=False)
    backend.accelerator = kind

    class Plugin:
        PLUGTORCH_CONTRACT = CONTRACT_VERSION

        @hookimpl
        def plugtorch_register(self, registrar):
            registrar.add_backend(backend)

    name = plugtorch.register_plugin(Plugin(), name=f"fake-{kind}-gaps")
    try:
        x = plugtorch.zeros(2, device=backend.name)
        assert [getattr(x, p) for p in PREDICATES] == [kind == "cuda", kind == "xpu", kind == "mps", False, False,
                                                      False, False]
        assert not isinstance(x, plugtorch.FloatTensor)  # torch: a CUDA tensor is a torch.cuda.FloatTensor
        if kind == "cuda":
            assert x.type() == "plugtorch.cuda.FloatTensor"  # torch: 'torch.cuda.FloatTensor'
    finally:
        plugtorch.unregister_plugin(name)


# -- index_put / index_put_ ------------------------------------------------------------------------

INDEX_PUTS = [  # (indices as lists, values shape)
    (([0, 0, 2],), (4,)),
    (([0, 0, 2], [1, 1, 3]), (3,)),
    (([2, 1],), (2, 4)),
    (([[0], [2]], [1, 2, 3]), (1,)),
    (([True, False, True],), ()),
    (([1],), (1, 4)),
]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("indices, values_shape", INDEX_PUTS)
def test_index_put_values_and_gradients(torch, indices, values_shape, accumulate):
    rng = np.random.default_rng(0)
    x, v, g = rng.standard_normal((3, 4)), rng.standard_normal(values_shape), rng.standard_normal((3, 4))

    def run(lib):
        xt, vt = lib.tensor(x, requires_grad=True), lib.tensor(v, requires_grad=True)
        idx = tuple(lib.tensor(i) for i in indices)
        y = (xt * 1).index_put(idx, vt * 2, accumulate=accumulate)
        y.backward(lib.tensor(g))
        return y, xt.grad, vt.grad
    ours, theirs = run(plugtorch), run(torch)
    duplicates = len(indices) == 1 and indices[0] == [0, 0, 2] or len(indices) == 2 and indices[1][0] == 1
    if accumulate or not duplicates:  # torch leaves which duplicate wins unspecified without accumulate
        np.testing.assert_allclose(_np(ours[0]), theirs[0].detach().numpy())
    for a, b in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(_np(a), b.numpy())


def test_index_put_in_place_and_through_plugtorch(torch):
    for lib in (plugtorch, torch):
        z = lib.zeros(3)
        assert z.index_put_((lib.tensor([0, 0, 1]),), lib.tensor([1.0, 2.0, 4.0]), accumulate=True) is z
        assert z.tolist() == [3.0, 4.0, 0.0]
        assert lib.index_put(z, (lib.tensor([2]),), lib.tensor(7.0)).tolist() == [3.0, 4.0, 7.0]
        assert z.tolist() == [3.0, 4.0, 0.0]
        n = lib.zeros(3, dtype=lib.int64).index_put((lib.tensor([0, 0]),), lib.tensor([1, 2]), accumulate=True)
        assert n.tolist() == [3, 0, 0]


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(3, 4).index_put((lib.tensor([0, 2]),), lib.ones(4, dtype=lib.float64)),
    lambda lib: lib.zeros(3, 4).index_put((lib.tensor([0.0, 2.0]),), lib.tensor(5.0)),
    lambda lib: lib.zeros(3, 4).index_put((lib.tensor([0, 5]),), lib.tensor(5.0)),
    lambda lib: lib.zeros(3, 4).index_put((lib.tensor([0, 2]),), 5.0),
    lambda lib: lib.zeros(3, 4).index_put(lib.tensor([0, 2]), lib.tensor(5.0)),
    lambda lib: lib.zeros(3, 4).index_put((lib.tensor([0, 2]),), lib.ones(3)),
    lambda lib: lib.zeros(3, 4).index_put((lib.tensor([0]),) * 3, lib.ones(1)),
    lambda lib: lib.zeros(3, requires_grad=True).index_put_((lib.tensor([0]),), lib.ones(1)),
])
def test_index_put_errors_as_torch(torch, call):
    _same_error(lambda: call(plugtorch), lambda: call(torch), exact=False)


# -- dropout2d / dropout3d on the ranks torch deprecates ---------------------------------------------

def _varying_dims(y):
    """The dims along which the dropout mask of an all-ones input changes."""
    a = np.asarray(y.tolist())
    return [d for d in range(a.ndim) if not (a == a.take([0], axis=d)).all()]


@pytest.mark.parametrize("name, ndim", [("dropout2d", 2), ("dropout2d", 3), ("dropout2d", 4), ("dropout2d", 5),
                                        ("dropout3d", 1), ("dropout3d", 2), ("dropout3d", 3), ("dropout3d", 4),
                                        ("dropout3d", 5), ("dropout3d", 6), ("dropout1d", 2), ("dropout1d", 3)])
def test_channel_dropout_ranks_as_torch(torch, name, ndim):
    shape = (7,) * ndim  # p = 0.5 over 7 draws: a dim that varies looks constant with odds 2**-6
    results = {}
    for lib in (torch, plugtorch):
        lib.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = getattr(lib.nn.functional, name)(lib.ones(shape), 0.5, True)
        results[lib.__name__] = (_varying_dims(y), sorted(set(np.asarray(y.tolist()).ravel().tolist())),
                                 [(w.category, str(w.message)) for w in caught])
    assert results["plugtorch"] == results["torch"]


@pytest.mark.parametrize("name, module, ndim", [("dropout2d", "Dropout2d", 2), ("dropout2d", "Dropout2d", 3),
                                                ("dropout3d", "Dropout3d", 3)])
def test_channel_dropout_modules_warn_and_keep_eval_identity(torch, name, module, ndim):
    for lib in (torch, plugtorch):
        m = getattr(lib.nn, module)(0.5)
        with pytest.warns(UserWarning, match=f"{name}: Received a {ndim}"):
            m(lib.ones((4,) * ndim))
        m.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = lib.ones((4,) * ndim)
            assert m(x).tolist() == x.tolist()


def test_channel_dropout_in_place_and_gradient(torch):
    x = plugtorch.ones(3, 4, 5, requires_grad=True)
    with pytest.warns(UserWarning):
        y = F.dropout3d(x * 1, 0.5, True)
    y.sum().backward()
    np.testing.assert_array_equal(_np(x.grad), _np(y))  # the gradient is the mask, scaled
    z = plugtorch.ones(3, 4, 5)
    with pytest.warns(UserWarning):
        out = F.dropout2d(z, 0.5, True, inplace=True)
    assert out is z and _varying_dims(z) in ([0, 1], [0], [1])
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="Feature dropout requires at least 2"):
        F.dropout2d(plugtorch.ones(5), 0.5, True)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(plugtorch.ones(5), 0.5, True)
