"""The models of ``bench_models.py``, written once for either library (``lib`` is ``plugtorch`` or
``torch``), as a user of either would write them: a CIFAR-sized ResNet, a minGPT-style character
model (attention written out, or through ``F.scaled_dot_product_attention``), a
``TransformerEncoderLayer`` stack, and the word-language-model LSTM. Each builder returns
``(model, inputs, targets, loss_fn)`` on synthetic data drawn from a fixed seed.
"""
from __future__ import annotations

import functools
import math

import numpy as np


def resnet(lib, batch=32):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 16, 1), Block(16, 32, 2), Block(32, 32, 1))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            return self.fc(self.pool(self.blocks(self.stem(x))).flatten(1))

    lib.manual_seed(0)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, batch))
    return ResNet(), x, y, F.cross_entropy


def gpt(lib, batch=16, sdpa=False, block=64, vocab=65, d=128, heads=4, layers=2):
    nn, F = lib.nn, lib.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.drop = nn.Dropout(0.1)
            self.register_buffer("mask", lib.tril(lib.ones(block, block)).view(1, 1, block, block))

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.qkv(x).split(d, dim=2)
            q = q.view(b, t, heads, c // heads).transpose(1, 2)
            k = k.view(b, t, heads, c // heads).transpose(1, 2)
            v = v.view(b, t, heads, c // heads).transpose(1, 2)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
                att = self.drop(F.softmax(att, dim=-1))
                y = att @ v
            return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(d), Attention()
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(lib.zeros(1, block, d))
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos[:, :idx.size(1), :]
            return self.head(self.ln(self.blocks(x)))

    lib.manual_seed(0)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.integers(0, vocab, (batch, block)))
    y = lib.tensor(rng.integers(0, vocab, (batch, block)))
    return GPT(), x, y, lambda logits, y: F.cross_entropy(logits.view(-1, vocab), y.view(-1))


def encoder(lib, batch=16, seq=64, d=128, heads=4, layers=2, vocab=65):
    nn, F = lib.nn, lib.nn.functional

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            return self.head(self.encoder(self.tok(idx)))

    lib.manual_seed(0)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.integers(0, vocab, (batch, seq)))
    y = lib.tensor(rng.integers(0, vocab, (batch, seq)))
    return Encoder(), x, y, lambda logits, y: F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))


def lstm(lib, batch=20, seq=35, vocab=2000, emb=128, hidden=256):
    nn, F = lib.nn, lib.nn.functional

    class WordLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emb)
            self.rnn = nn.LSTM(emb, hidden, 2, dropout=0.2)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, idx):
            out, _ = self.rnn(self.encoder(idx))
            return self.decoder(out)

    lib.manual_seed(0)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.integers(0, vocab, (seq, batch)))
    y = lib.tensor(rng.integers(0, vocab, (seq, batch)))
    return WordLM(), x, y, lambda logits, y: F.cross_entropy(logits.view(-1, vocab), y.view(-1))


MODELS = {"resnet": resnet, "gpt": gpt, "gpt_sdpa": functools.partial(gpt, sdpa=True), "encoder": encoder,
          "lstm": lstm}


def train_step(lib, name: str, **sizes):
    """A zero_grad + forward + backward + AdamW step of model ``name`` (built with ``sizes``, its
    builder's keywords, where the defaults are too large), the model and its batch."""
    model, x, y, loss_fn = MODELS[name](lib, **sizes)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, model, x, y
