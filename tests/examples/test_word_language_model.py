"""pytorch/examples' word_language_model (model.py's RNNModel, PositionalEncoding and
TransformerModel, main.py's batching and training loop, commit 77f55b9) written once against a
``torch`` argument and run on plugtorch and on PyTorch from the same initial weights (PyTorch's,
loaded with load_state_dict): the training losses of every step and the evaluation loss agree;
``--onnx-export``'s export_onnx writes the trained model with ``plugtorch.onnx.export``, and
onnxruntime runs it.

Left out of main.py: the argument parser and the corpus files (synthetic tokens instead), and
reloading the best model with ``torch.load`` under ``torch.serialization.safe_globals``.
"""
from __future__ import annotations

import math
import os
from types import SimpleNamespace

import numpy as np
import pytest

import plugtorch


def word_language_model(torch):
    """The example's code with ``torch`` bound to the library it runs on (``import plugtorch as torch``)."""
    nn, F = torch.nn, torch.nn.functional

    # -- model.py -------------------------------------------------------------------------------
    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super(RNNModel, self).__init__()  # noqa: UP008 (the example's spelling)
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ['LSTM', 'GRU']:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                try:
                    nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
                except KeyError as e:
                    raise ValueError("""An invalid option for `--model` was supplied,
                                     options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']""") from e
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)

            # Optionally tie weights (Press & Wolf 2016; Inan et al. 2016)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError('When using the tied flag, nhid must be equal to emsize')
                self.decoder.weight = self.encoder.weight

            self.init_weights()

            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == 'LSTM':
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
            else:
                return weight.new_zeros(self.nlayers, bsz, self.nhid)

    class PositionalEncoding(nn.Module):
        """Sine and cosine encodings of the token positions, added to the embeddings."""

        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super(PositionalEncoding, self).__init__()  # noqa: UP008 (the example's spelling)
            self.dropout = nn.Dropout(p=dropout)

            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer('pe', pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        """Container module with an encoder, a recurrent or transformer module, and a decoder."""

        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super(TransformerModel, self).__init__(  # noqa: UP008 (the example's spelling)
                d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers)
            self.model_type = 'Transformer'
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)

            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)

            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return torch.log(torch.tril(torch.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                device = src.device
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(device)
                    self.src_mask = mask
            else:
                self.src_mask = None

            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    # -- main.py --------------------------------------------------------------------------------
    device = torch.device("cpu")

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        data = data.view(bsz, -1).t().contiguous()
        return data.to(device)

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        else:
            return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i, args):
        seq_len = min(args.bptt, len(source) - 1 - i)
        data = source[i:i + seq_len]
        target = source[i + 1:i + 1 + seq_len].view(-1)
        return data, target

    def evaluate(model, data_source, ntokens, args):
        model.eval()
        criterion = nn.NLLLoss()
        total_loss = 0.
        if args.model != 'Transformer':
            hidden = model.init_hidden(args.eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args)
                if args.model == 'Transformer':
                    output = model(data)
                    output = output.view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train(model, train_data, ntokens, lr, args):
        """One epoch of main.py's train(); the loss of each batch instead of its log lines."""
        model.train()
        criterion = nn.NLLLoss()
        losses = []
        if args.model != 'Transformer':
            hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):  # noqa: B007 (batch: its logging)
            data, targets = get_batch(train_data, i, args)
            model.zero_grad()
            if args.model == 'Transformer':
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()

            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        return losses

    def export_onnx(model, path, batch_size, seq_len, args):
        print('The model is also exported in ONNX format at {}.'.format(  # noqa: UP032 (the example's spelling)
            os.path.realpath(args.onnx_export)))
        model.eval()
        dummy_input = torch.LongTensor(seq_len * batch_size).zero_().view(-1, batch_size).to(device)
        hidden = model.init_hidden(batch_size)
        torch.onnx.export(model, (dummy_input, hidden), path)

    return SimpleNamespace(RNNModel=RNNModel, TransformerModel=TransformerModel, batchify=batchify,
                           train=train, evaluate=evaluate, export_onnx=export_onnx)


NTOKENS = 30


def _corpus(n, seed):
    """Tokens with structure to learn: a walk that mostly steps by +1 (mod NTOKENS)."""
    rng = np.random.default_rng(seed)
    steps = np.where(rng.random(n) < 0.8, 1, rng.integers(0, NTOKENS, n))
    return np.cumsum(steps) % NTOKENS


def _build(torch, args):
    ex = word_language_model(torch)
    if args.model == 'Transformer':
        model = ex.TransformerModel(NTOKENS, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout)
    else:
        model = ex.RNNModel(args.model, NTOKENS, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
    # torch's dropout masks cannot be drawn here: the Transformer's layers keep nn.Transformer's
    # dropout of 0.1 whatever --dropout says, so every dropout is switched off for the comparison
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        elif isinstance(m, torch.nn.MultiheadAttention):
            m.dropout = 0.0
    return ex, model


def _run(torch, args, initial=None):
    ex, model = _build(torch, args)
    if initial is not None:
        result = model.load_state_dict({k: torch.tensor(v) for k, v in initial.items()})
        assert not result.missing_keys and not result.unexpected_keys
    train_data = ex.batchify(torch.tensor(_corpus(210, 0)), args.batch_size)
    val_data = ex.batchify(torch.tensor(_corpus(120, 1)), args.eval_batch_size)
    losses = []
    lr = args.lr
    for _ in range(args.epochs):
        losses += ex.train(model, train_data, NTOKENS, lr, args)
    return model, losses, ex.evaluate(model, val_data, NTOKENS, args)


# main.py's defaults, shrunk: two epochs of 7 batches (the last one a single row) on 30 tokens; lr 5,
# not 20: at 20 this small Transformer's loss jumps about and float32 rounding grows toward 1e-4
ARGS = dict(emsize=16, nhid=16, nlayers=2, lr=5.0, clip=0.25, epochs=2, batch_size=4, eval_batch_size=5,
            bptt=8, dropout=0.0, tied=False, nhead=2)


@pytest.fixture
def torch(torch):
    """PyTorch on one thread: its tiny recurrent steps otherwise wait on a busy second core for seconds."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(before)


@pytest.mark.parametrize("model,extra", [("Transformer", {}), ("LSTM", {}), ("GRU", {"tied": True}),
                                         ("RNN_TANH", {}), ("RNN_RELU", {"nlayers": 1})], ids=str)
def test_training_matches_pytorch(torch, model, extra):
    args = SimpleNamespace(**{**ARGS, **extra, "model": model})
    torch.manual_seed(1111)
    start = {k: v.numpy() for k, v in _build(torch, args)[1].state_dict().items()}
    theirs, their_losses, their_val = _run(torch, args, initial=start)
    ours, our_losses, our_val = _run(plugtorch, args, initial=start)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert len(our_losses) == 14
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-4)
    np.testing.assert_allclose(our_val, their_val, rtol=1e-4)
    for name, p in ours.named_parameters():
        assert not np.array_equal(p.detach().numpy(), start[name]), f"{name} was not trained"
        np.testing.assert_allclose(p.detach().numpy(), theirs.state_dict()[name].numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=name)


def test_transformer_model_is_an_nn_transformer():
    ex = word_language_model(plugtorch)
    model = ex.TransformerModel(NTOKENS, 16, 2, 16, 2, 0.2)
    assert isinstance(model, plugtorch.nn.Transformer)
    assert isinstance(model.decoder, plugtorch.nn.Linear)  # replaces nn.Transformer's decoder stack in place
    assert list(model.state_dict())[-6:] == ["encoder.norm.weight", "encoder.norm.bias", "decoder.weight",
                                             "decoder.bias", "pos_encoder.pe", "input_emb.weight"]
    out = model(plugtorch.randint(0, NTOKENS, (7, 3)))
    assert out.shape == (7, 3, NTOKENS)
    np.testing.assert_allclose(out.exp().sum(-1).detach().numpy(), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="nhid must be equal to emsize"):
        ex.RNNModel("LSTM", NTOKENS, 16, 8, 1, tie_weights=True)


@pytest.mark.parametrize("model", ["LSTM", "GRU", "RNN_TANH"])
def test_onnx_export_runs_in_onnxruntime(torch, tmp_path, model):
    """main.py's --onnx-export after training: the exported graph, run by onnxruntime on new tokens and
    a new hidden state, gives the trained model's log-probabilities and hidden state (plugtorch's and,
    from the same weights, PyTorch's)."""
    pytest.importorskip("onnx", reason="the onnx package is not installed (pip install plugtorch[onnx])")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: nothing runs the export")
    args = SimpleNamespace(**{**ARGS, "model": model, "epochs": 1, "onnx_export": str(tmp_path / "model.onnx")})
    ours, _, _ = _run(plugtorch, args)
    ex = word_language_model(plugtorch)
    ex.export_onnx(ours, args.onnx_export, batch_size=1, seq_len=args.bptt, args=args)
    session = ort.InferenceSession(args.onnx_export, providers=["CPUExecutionProvider"])

    data = plugtorch.tensor(_corpus(args.bptt, 2)).view(-1, 1)
    hidden = ours.init_hidden(1)
    hidden = tuple(h + 0.1 for h in hidden) if model == "LSTM" else hidden + 0.1
    flat = list(hidden) if model == "LSTM" else [hidden]
    got = session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), [data, *flat])})
    with plugtorch.no_grad():
        out, h = ours(data, hidden)
    want = [out] + (list(h) if model == "LSTM" else [h])
    assert len(got) == len(want)
    theirs = _build(torch, args)[1]
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    theirs.eval()
    with torch.no_grad():
        t_out, t_h = theirs(torch.tensor(data.numpy()), tuple(torch.tensor(t.numpy()) for t in flat)
                            if model == "LSTM" else torch.tensor(hidden.numpy()))
    for g, w, t in zip(got, want, [t_out] + (list(t_h) if model == "LSTM" else [t_h])):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(g, t.numpy(), atol=1e-5, rtol=1e-5)
