"""nn.utils.rnn (packing, padding) and RNN/LSTM/GRU on PackedSequence input, against torch."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import plugtorch
from plugtorch import nn
from plugtorch.nn.utils import rnn as R

from .helpers import copy_weights

LENGTHS = [5, 2, 4, 1]  # unsorted, no ties: both libraries pack in the same order


def _np(t):
    return t.detach().numpy()


def test_pad_sequence_matches_torch(torch):
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((n, 3)) for n in (2, 5, 3)]
    for batch_first, side, value in itertools.product((False, True), ("right", "left"), (0.0, -1.5)):
        ours = R.pad_sequence([plugtorch.tensor(s) for s in seqs], batch_first, value, side)
        theirs = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first, value, side)
        np.testing.assert_array_equal(_np(ours), theirs.numpy())
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, but got up."):
        R.pad_sequence([plugtorch.ones(2)], padding_side="up")
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        R.pad_sequence([])


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_pad_round_trip_and_gradients(torch, batch_first):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5, 3) if batch_first else (5, 4, 3))
    xp, xt = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    pp = R.pack_padded_sequence(xp, LENGTHS, batch_first, enforce_sorted=False)
    pt = torch.nn.utils.rnn.pack_padded_sequence(xt, LENGTHS, batch_first, enforce_sorted=False)
    np.testing.assert_array_equal(_np(pp.data), pt.data.detach().numpy())
    assert pp.batch_sizes.tolist() == pt.batch_sizes.tolist() and pp.batch_sizes.dtype == plugtorch.int64
    assert pp.sorted_indices.tolist() == pt.sorted_indices.tolist()
    assert pp.unsorted_indices.tolist() == pt.unsorted_indices.tolist()
    yp, lp = R.pad_packed_sequence(pp, batch_first, padding_value=7.0, total_length=6)
    yt, lt = torch.nn.utils.rnn.pad_packed_sequence(pt, batch_first, padding_value=7.0, total_length=6)
    np.testing.assert_array_equal(_np(yp), yt.detach().numpy())
    assert lp.tolist() == lt.tolist() == LENGTHS
    up = rng.standard_normal(tuple(yt.shape))
    (yp * plugtorch.tensor(up)).sum().backward()
    (yt * torch.tensor(up)).sum().backward()
    np.testing.assert_array_equal(xp.grad.numpy(), xt.grad.numpy())
    for a, b in zip(R.unpad_sequence(yp, lp, batch_first), torch.nn.utils.rnn.unpad_sequence(yt, lt, batch_first)):
        np.testing.assert_array_equal(_np(a), b.detach().numpy())


def test_pack_sequence_and_unpack(torch):
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 2)) for n in (3, 3, 1)]
    pp = R.pack_sequence([plugtorch.tensor(s) for s in seqs])
    pt = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs])
    np.testing.assert_array_equal(_np(pp.data), pt.data.numpy())
    assert pp.sorted_indices is None and pp.unsorted_indices is None
    for a, s in zip(R.unpack_sequence(pp), seqs):
        np.testing.assert_array_equal(_np(a), s)
    assert isinstance(pp.double().data, plugtorch.Tensor) and pp.float().data.dtype == plugtorch.float32


def test_packing_errors_are_torchs():
    x = plugtorch.ones(3, 2, 1)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when `enforce_sorted` is True"):
        R.pack_padded_sequence(x, [1, 3])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        R.pack_padded_sequence(x, [3, 0])
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to batch_size, but got 3 "
                                           r"\(batch_size=2\)"):
        R.pack_padded_sequence(x, [3, 2, 1])
    with pytest.raises(RuntimeError, match="a length of 4 is longer than the input's 3 time steps"):
        R.pack_padded_sequence(x, [4, 2])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of the longest"):
        R.pad_packed_sequence(R.pack_padded_sequence(x, [3, 2]), total_length=2)


CASES = [(kind, layers, bidir, batch_first, sort)
         for kind in ("LSTM", "GRU", "RNN")
         for layers, bidir, batch_first, sort in [(1, False, False, True), (2, True, True, False),
                                                  (2, False, False, False), (1, True, False, True)]]


@pytest.mark.parametrize("kind,layers,bidir,batch_first,enforce_sorted", CASES)
def test_recurrent_layers_on_packed_input_match_torch(torch, kind, layers, bidir, batch_first, enforce_sorted):
    rng = np.random.default_rng(3)
    kw = dict(num_layers=layers, bidirectional=bidir, batch_first=batch_first)
    theirs = getattr(torch.nn, kind)(3, 4, **kw).double()
    ours = getattr(nn, kind)(3, 4, **kw, dtype=plugtorch.float64)
    copy_weights(ours, theirs)
    lengths = sorted(LENGTHS, reverse=True) if enforce_sorted else LENGTHS
    x = rng.standard_normal((4, 5, 3) if batch_first else (5, 4, 3))
    d = 2 if bidir else 1
    states = [rng.standard_normal((d * layers, 4, 4)) for _ in range(2 if kind == "LSTM" else 1)]
    ins_p = [plugtorch.tensor(a, requires_grad=True) for a in [x, *states]]
    ins_t = [torch.tensor(a, requires_grad=True) for a in [x, *states]]
    outs = []
    for lib, mod, ins in ((R, ours, ins_p), (torch.nn.utils.rnn, theirs, ins_t)):
        packed = lib.pack_padded_sequence(ins[0], lengths, batch_first, enforce_sorted)
        y, h = mod(packed, tuple(ins[1:]) if kind == "LSTM" else ins[1])
        assert type(y).__name__ == "PackedSequence"
        padded, _ = lib.pad_packed_sequence(y, batch_first)
        outs.append([padded, *(h if kind == "LSTM" else (h,))])
    ups = [rng.standard_normal(tuple(o.shape)) for o in outs[1]]
    sum((o * plugtorch.tensor(u)).sum() for o, u in zip(outs[0], ups)).backward()
    sum((o * torch.tensor(u)).sum() for o, u in zip(outs[1], ups)).backward()
    for a, b in zip(outs[0], outs[1]):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), atol=1e-10)
    for a, b in zip(ins_p, ins_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=1e-10, err_msg=name)


def test_packed_input_without_initial_state_and_with_projection(torch):
    rng = np.random.default_rng(4)
    theirs = torch.nn.LSTM(3, 5, proj_size=2, bidirectional=True).double()
    ours = nn.LSTM(3, 5, proj_size=2, bidirectional=True, dtype=plugtorch.float64)
    copy_weights(ours, theirs)
    seqs = [rng.standard_normal((n, 3)) for n in (4, 2, 3)]
    yp, (hp, cp) = ours(R.pack_sequence([plugtorch.tensor(s) for s in seqs], enforce_sorted=False))
    yt, (ht, ct) = theirs(torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False))
    np.testing.assert_allclose(_np(yp.data), yt.data.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(_np(hp), ht.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(_np(cp), ct.detach().numpy(), atol=1e-10)
    assert yp.batch_sizes.tolist() == yt.batch_sizes.tolist()


def test_packed_hidden_state_of_wrong_size_is_refused():
    packed = R.pack_sequence([plugtorch.ones(3, 2), plugtorch.ones(1, 2)])
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]"):
        nn.GRU(2, 4)(packed, plugtorch.zeros(1, 3, 4))


@pytest.mark.parametrize("name", ["pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "unpad_sequence",
                                  "pack_sequence", "unpack_sequence", "invert_permutation"])
def test_signatures_are_torchs(torch, name):
    import inspect

    def sig(fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    assert sig(getattr(R, name)) == sig(getattr(torch.nn.utils.rnn, name))
    assert R.PackedSequence._fields == torch.nn.utils.rnn.PackedSequence._fields
