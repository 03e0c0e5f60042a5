"""The backend plugin example (examples/array_api_backend, ``plugtorch-arrayapi``).

First what the package builds because the array API standard lacks it (NumPy-style
indexing, writes and scatters, padding, windows, erf, random numbers, shifts, fmod,
bitcast), each against NumPy or the published reference values; then the package
pip-installed as a user would: discovered, reported by ``plugtorch plugins``, training
models, and passing the conformance kit run as its author would run it.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

import plugtorch
from plugtorch import library

from .example_packages import EXAMPLES, install_examples, run_cli, run_conformance, run_python

xp = pytest.importorskip("array_api_strict")

# The whole kit (every op, on arrayapi and arrayapi_bare) takes minutes of CPU on this backend;
# these ops use every primitive the package builds from others (indexing, writes, scatters,
# pad, windows, erf, argsort, cumulative sums, fmod), both fused kernels and a reduction.
# docs/plugins.md says how to run all of it.
KIT_OPS = "erf,getitem,index_put,index_add,scatter_add,gather,conv2d,pad,sort,cumsum,softmax,log_softmax,sum,where,fmod"


# -- the emulated primitives, in this process ------------------------------------------------------

@pytest.fixture(scope="module")
def prims():
    """The package's primitive table (importing it registers the backend: undone afterwards)."""
    sys.path.insert(0, str(EXAMPLES / "array_api_backend"))
    try:
        import plugtorch_arrayapi
        yield plugtorch_arrayapi.BACKEND.primitives
    finally:
        sys.path.remove(str(EXAMPLES / "array_api_backend"))
        if "arrayapi" in plugtorch.get_registry().plugin_names():
            plugtorch.unregister_plugin("arrayapi")
        library._LIBRARIES.pop("arrayapi", None)
        for name in [m for m in sys.modules if m.startswith("plugtorch_arrayapi")]:
            del sys.modules[name]


def _native(index):
    if isinstance(index, tuple):
        return tuple(_native(k) for k in index)
    return xp.asarray(index) if isinstance(index, (np.ndarray, list)) else index


def _host(a):
    return np.asarray(np.from_dlpack(a))


_BASE = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
_INDICES = [
    (1,), (-1, slice(None), 2), (slice(1, 10),), (slice(None, None, 2), Ellipsis, slice(-3, None)),
    (slice(5, 1),), (slice(3, None, -1),), (None, 0, Ellipsis, None),
    (np.array([[1, 0], [0, 1]]),), (slice(None), np.array([2, 0, -1])),
    (np.array([1, 0]), slice(None), np.array([3, 2])),                     # apart: the result axes lead
    (slice(None), np.array([0, 2]), np.array([1, 3])),                     # together: they stay
    (0, slice(None), np.array([1, 2])),                                    # an int beside an array counts
    (Ellipsis, np.array([4, 4, 0])), (np.array([], dtype=np.int64),),
    (_BASE % 3 == 0,), (np.array([[True, False, True], [False, False, True]]),),
    (Ellipsis, np.array([True, False, True, True, False])), (np.array(True),), (np.array(False),),
]


@pytest.mark.parametrize("index", _INDICES, ids=range(len(_INDICES)))
def test_getitem_follows_numpy_indexing(prims, index):
    got = _host(prims["getitem"](xp.asarray(_BASE), _native(index)))
    np.testing.assert_array_equal(got, _BASE[index])


@pytest.mark.parametrize("index", [(1,), (slice(None), np.array([2, 0, 2])), (np.array([1, 0]), slice(None),
                                   np.array([3, 2])), (_BASE > 60,), (0, Ellipsis, np.array([1, 1, 4]))],
                         ids=range(5))
def test_setitem_writes_in_place_as_numpy_does(prims, index):
    expected = _BASE.copy()
    values = np.arange(np.shape(expected[index])[-1], dtype=np.float64) + 0.5
    expected[index] = values
    x = xp.asarray(_BASE)
    assert prims["setitem"](x, _native(index), xp.asarray(values)) is None
    np.testing.assert_array_equal(_host(x), expected)  # repeated positions keep the last value


def test_index_add_and_scatter_add_sum_repeated_positions(prims):
    index = (np.array([0, 2, 0, 0]), slice(None))
    values = np.arange(4 * 5, dtype=np.float64).reshape(4, 5)
    expected = np.ones((3, 5))
    np.add.at(expected, index, values)
    got = prims["index_add"](xp.ones((3, 5), dtype=xp.float64), _native(index), xp.asarray(values))
    np.testing.assert_array_equal(_host(got), expected)

    idx = np.array([[2, 0, 2], [1, 1, 1]])
    src = np.arange(12, dtype=np.float64).reshape(3, 4)
    expected = np.zeros((3, 3))
    np.add.at(expected, (idx, np.arange(3)[None, :]), src[:2, :3])  # along axis 0, src cut to idx
    got = prims["scatter_add"](xp.zeros((3, 3), dtype=xp.float64), 0, xp.asarray(idx), xp.asarray(src))
    np.testing.assert_array_equal(_host(got), expected)


def test_pad_and_windows_match_numpy(prims):
    x = np.arange(2 * 7 * 6, dtype=np.float64).reshape(2, 7, 6)
    got = prims["pad"](xp.asarray(x), ((0, 0), (1, 2), (3, 0)), -1.0)
    np.testing.assert_array_equal(_host(got), np.pad(x, ((0, 0), (1, 2), (3, 0)), constant_values=-1.0))
    got = prims["windows"](xp.asarray(x), (2, 3), (2, 1), (2, 1))  # window, strides, dilation
    view = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))[:, ::2, :, ::2, :]
    np.testing.assert_array_equal(_host(got), view)
    assert tuple(got.shape) == (2, 3, 4, 2, 3)  # lead, n = (7 - 2*(2-1) - 1)//2 + 1 and (6 - 3)//1 + 1, window


def test_erf_is_accurate_to_double_precision(prims):
    points = np.concatenate([np.linspace(-7, 7, 4001), [0.0, -0.0, 1e-300, 2.5, -2.5, 6.0, 40.0]])
    got = _host(prims["erf"](xp.asarray(points)))
    expected = np.array([math.erf(v) for v in points])
    np.testing.assert_allclose(got, expected, rtol=2e-15, atol=0)  # 2e-15: under 10 ulps
    assert math.copysign(1, got[-6]) == -1.0  # erf(-0.0) is -0.0
    special = _host(prims["erf"](xp.asarray([np.inf, -np.inf, np.nan])))
    assert special[0] == 1 and special[1] == -1 and np.isnan(special[2])
    f32 = prims["erf"](xp.asarray(points.astype(np.float32)))
    assert f32.dtype == xp.float32  # rounded once from float64: the float32 nearest erf(x)
    expected = np.array([math.erf(v) for v in points.astype(np.float32).astype(np.float64)], dtype=np.float32)
    np.testing.assert_allclose(_host(f32), expected, rtol=1.2e-7, atol=0)


def test_philox_matches_the_published_known_answers():
    sys.path.insert(0, str(EXAMPLES / "array_api_backend"))
    try:
        from plugtorch_arrayapi.philox import philox4x32
    finally:
        sys.path.remove(str(EXAMPLES / "array_api_backend"))
    # Random123's kat_vectors for philox4x32_10: (counter words, key words) -> output words
    for counter, key, expected in [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ]:
        words = philox4x32(xp, tuple(xp.asarray([c], dtype=xp.uint64) for c in counter), key[0] | key[1] << 32)
        assert tuple(int(w[0]) for w in words) == expected


def test_random_numbers_have_a_json_state_and_the_right_distributions(prims):
    gen = prims["generator"](1234)
    state = json.loads(json.dumps(prims["generator_get_state"](gen)))
    first = _host(prims["uniform"](gen, (1000,), -1.0, 3.0, plugtorch.float64))
    prims["generator_set_state"](gen, state)
    np.testing.assert_array_equal(_host(prims["uniform"](gen, (1000,), -1.0, 3.0, plugtorch.float64)), first)
    assert first.min() >= -1 and first.max() < 3 and abs(first.mean() - 1) < 0.15
    normal = _host(prims["normal"](gen, (20000,), 2.0, 0.5, plugtorch.float32))
    assert normal.dtype == np.float32 and abs(normal.mean() - 2) < 0.02 and abs(normal.std() - 0.5) < 0.02
    ints = _host(prims["randint"](gen, -3, 4, (2000,), plugtorch.int64))
    assert ints.dtype == np.int64 and set(ints.tolist()) == set(range(-3, 4))
    perm = _host(prims["permutation"](gen, 50))
    assert sorted(perm.tolist()) == list(range(50)) and perm.tolist() != list(range(50))
    other = prims["generator"](1235)
    assert not np.array_equal(_host(prims["uniform"](other, (1000,), -1.0, 3.0, plugtorch.float64)), first)


def test_shifts_fmod_and_bitcast_as_the_contract_states(prims):
    x = xp.asarray([-8, 5, 1], dtype=xp.int8)
    assert _host(prims["left_shift"](x, xp.asarray([1, 8, -1], dtype=xp.int8))).tolist() == [-16, 0, 0]
    assert _host(prims["right_shift"](x, xp.asarray([9, 9, 0], dtype=xp.int8))).tolist() == [-1, 0, 1]
    assert _host(prims["right_shift"](x, 1)).tolist() == [-4, 2, 0]
    f = _host(prims["fmod"](xp.asarray([-7.5, 7.5, -0.0]), 2.0))
    np.testing.assert_array_equal(f, np.fmod([-7.5, 7.5, -0.0], 2.0))
    assert math.copysign(1, f[2]) == -1.0
    assert _host(prims["fmod"](xp.asarray([-7, 7], dtype=xp.int32), xp.asarray([2, -2], dtype=xp.int32))).tolist() \
        == [-1, 1]
    a = xp.asarray([1.0, -2.0], dtype=xp.float32)
    bits = prims["bitcast"](a, plugtorch.int32)
    assert _host(bits).tolist() == np.array([1.0, -2.0], dtype=np.float32).view(np.int32).tolist()
    a[0] = 3.0  # a view: it sees the write
    assert _host(bits)[0] == np.float32(3.0).view(np.int32)


def test_strides_come_from_dlpack_and_copies_are_row_major(prims):
    a = xp.reshape(xp.arange(6.0), (2, 3))
    t = xp.permute_dims(a, (1, 0))
    assert prims["strides"](a) == (3, 1) and prims["strides"](t) == (1, 3)
    assert prims["strides"](xp.broadcast_to(xp.asarray([1.0, 2.0]), (3, 2))) == (0, 1)
    assert prims["contiguous"](a) is a
    c = prims["contiguous"](t)
    assert prims["strides"](c) == (2, 1) and _host(c).tolist() == _host(t).tolist()
    assert prims["strides"](prims["copy"](t)) == (2, 1)


def test_the_table_provides_every_primitive_of_the_contract(prims):
    from plugtorch.core.primitives import PRIMITIVES
    assert sorted(set(PRIMITIVES) - set(prims)) == []


def test_a_dtype_the_standard_lacks_is_refused_with_the_reason(prims):
    with pytest.raises(TypeError, match="backend 'arrayapi' has no float16: the array API standard"):
        plugtorch.zeros(2, dtype=plugtorch.float16, device="arrayapi")


# -- the package, pip-installed ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return install_examples(tmp_path_factory)


def test_the_backend_is_discovered_through_its_entry_point_and_reported(site):
    r = run_cli(site, "plugins", "--op", "softmax")
    assert r.returncode == 0, r.stderr
    lines = [line.split() for line in r.stdout.splitlines()]
    assert ["arrayapi", "loaded", "entry", "point", "(plugtorch-arrayapi", "0.1.0,", "entry", "point",
            "'arrayapi", "=", "plugtorch_arrayapi:lib',", "contract", "1)"] in lines
    assert ["arrayapi", "available;", "host", "memory;", "from", "arrayapi"] in lines
    assert ["arrayapi", "kernel", "from", "arrayapi"] in lines  # its fused softmax

    r = run_cli(site, "plugins", "--json", "--op", "erf")
    report = json.loads(r.stdout)
    plugin = next(p for p in report["plugins"] if p["name"] == "arrayapi")
    assert (plugin["status"], plugin["distribution"], plugin["version"], plugin["entry_point"],
            plugin["contract"]) == ("loaded", "plugtorch-arrayapi", "0.1.0", "arrayapi = plugtorch_arrayapi:lib", 1)
    backend = next(b for b in report["backends"] if b["name"] == "arrayapi")
    assert backend == {"name": "arrayapi", "plugin": "arrayapi", "available": True, "unavailable_reason": "",
                       "host_memory": True, "aliases": []}
    assert report["ops"]["erf"]["backends"]["arrayapi"]["served_by"] == "primitive 'erf'"


def test_models_train_on_the_backend_as_on_numpy(site):
    r = run_python(site, """
        import numpy as np
        import plugtorch
        from plugtorch import nn
        import plugtorch.nn.functional as F

        def cnn():
            plugtorch.manual_seed(0)
            return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                 nn.Linear(4 * 4 * 4, 16), nn.GELU(), nn.Linear(16, 3))

        def train(device):
            model = cnn().to(device)
            opt = plugtorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            x = plugtorch.tensor(np.random.default_rng(1).standard_normal((32, 1, 8, 8)), dtype=plugtorch.float32,
                                 device=device)
            y = plugtorch.tensor(np.arange(32) % 3, device=device)
            losses = []
            for _ in range(8):
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            return losses, model[0].weight.grad.device

        ours, device = train("arrayapi")
        ref, _ = train("numpy")
        print(device, ours[-1] < ours[0] - 0.05, np.allclose(ours, ref, rtol=1e-4, atol=1e-5))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "arrayapi True True"


def test_random_numbers_on_the_backend_are_reproducible(site):
    r = run_python(site, """
        import json
        import plugtorch
        g = plugtorch.Generator().manual_seed(7)
        a = plugtorch.randn(5, device="arrayapi", generator=g)
        state = json.loads(json.dumps(g.get_state()))
        b = plugtorch.rand(3, device="arrayapi", generator=g)
        g.set_state(state)
        c = plugtorch.rand(3, device="arrayapi", generator=g)
        d = plugtorch.randn(5, device="arrayapi", generator=plugtorch.Generator().manual_seed(7))
        print(b.tolist() == c.tolist(), a.tolist() == d.tolist(), sorted(state["backends"]))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True ['arrayapi']"


def test_the_author_runs_the_conformance_kit_on_the_backend(site, tmp_path):
    # arrayapi (with its fused kernels) and arrayapi_bare (the core's decompositions on its
    # primitives); a representative subset of the ops, see KIT_OPS
    r = run_conformance(site, tmp_path, "--plugtorch-backends", "arrayapi,arrayapi_bare",
                        "--plugtorch-ops", KIT_OPS)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    summary = r.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert int(summary.split()[0]) > 700, summary  # both backends ran, every kind of check
