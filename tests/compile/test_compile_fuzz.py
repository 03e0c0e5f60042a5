"""plugtorch.compile against eager execution, under whatever a training script does between
calls. Hypothesis draws a model, an optimizer, a step function and a sequence of calls, each
after perturbations such as ``eval()``, ``load_state_dict``, ``requires_grad_`` flips, edits of
the parameter groups, replaced parameters and modules, aliased or parameter arguments, other
batch sizes and ``no_grad``. Two identical worlds make the same calls, one compiled: after
every call their results, parameters, gradients, buffers and optimizer state must be bitwise
equal (a replay, a new capture and an eager fallback all pass; a different number never does),
and where eager raises the compiled call raises the same.

``PLUGTORCH_FUZZ_EXAMPLES`` sets the number of examples (a longer run: 2000).
"""
from __future__ import annotations

import copy
import os
import warnings
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn

EXAMPLES = int(os.environ.get("PLUGTORCH_FUZZ_EXAMPLES", "300"))

KINDS = ("train", "accumulate", "pair", "functional", "forward")
PERTURBATIONS = (
    "train", "eval", "snapshot", "load_model", "load_optimizer", "requires_grad", "lr", "weight_decay",
    "momentum", "add_group", "inplace", "replace_data", "replace_parameter", "replace_module", "dropout_p",
    "zero_grad_none", "zero_grad_zeros", "grad_none", "batch", "no_grad", "alias", "parameter_argument",
)


@dataclass(frozen=True)
class Spec:
    seed: int
    batchnorm: bool
    dropout: bool
    optimizer: str
    kind: str
    zero_inside: bool


class Net(nn.Module):
    def __init__(self, spec: Spec):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.norm = nn.BatchNorm1d(8) if spec.batchnorm else nn.Identity()
        self.drop = nn.Dropout(0.5) if spec.dropout else nn.Identity()
        self.fc2 = nn.Linear(8, 3)
        self.extra = nn.Parameter(plugtorch.randn(3))  # in no param group until "add_group"

    def forward(self, x, first=None):
        h = self.fc1(x) if first is None else first
        return self.fc2(self.drop(F.relu(self.norm(h)))) + self.extra


class World:
    """A model, its optimizer and a step function over them; ``compiled``: under plugtorch.compile."""

    def __init__(self, spec: Spec, compiled: bool):
        plugtorch.manual_seed(spec.seed)
        self.spec = spec
        self.model = model = Net(spec)
        params = [p for n, p in model.named_parameters() if n != "extra"]
        if spec.optimizer == "sgd":
            self.opt = plugtorch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
        elif spec.optimizer == "adam":
            self.opt = plugtorch.optim.Adam(params, lr=0.01)
        else:
            self.opt = plugtorch.optim.AdamW(params, lr=0.01, amsgrad=True)
        self.snapshot = None
        self.grouped = False
        fn = getattr(self, spec.kind)
        self.run = plugtorch.compile(fn) if compiled else fn

    def _finish(self, out, target):
        loss = F.mse_loss(out, target)
        loss.backward()
        self.opt.step()
        return loss

    def train(self, x, y):
        if self.spec.zero_inside:
            self.opt.zero_grad()
        return self._finish(self.model(x), y)

    def accumulate(self, x, y):  # gradients pile up until zeroed outside
        return self._finish(self.model(x), y)

    def pair(self, a, b):  # two arguments of one shape: aliasing matters
        self.opt.zero_grad(set_to_none=self.spec.zero_inside)
        loss = (self.model(a) + 2 * self.model(b)).square().mean()
        loss.backward()
        self.opt.step()
        return loss

    def functional(self, x, y):  # reads fc1's parameters without calling fc1
        if self.spec.zero_inside:
            self.opt.zero_grad()
        fc1 = self.model.fc1
        return self._finish(self.model(x, first=F.linear(x, fc1.weight, fc1.bias)), y)

    def forward(self, x, y):
        return self.model(x) * 1.0 + y.sum()

    # -- between calls ---------------------------------------------------------------
    def perturb(self, what: str, rng: np.random.Generator) -> None:
        model, opt = self.model, self.opt
        params = list(model.parameters())
        pick = params[int(rng.integers(len(params)))]
        if what == "train":
            model.train()
        elif what == "eval":
            model.eval()
        elif what == "snapshot":
            self.snapshot = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
        elif what == "load_model" and self.snapshot is not None:
            model.load_state_dict(self.snapshot[0])
        elif what == "load_optimizer" and self.snapshot is not None and len(opt.param_groups) == \
                len(self.snapshot[1]["param_groups"]):
            opt.load_state_dict(self.snapshot[1])
        elif what == "requires_grad":
            pick.requires_grad_(not pick.requires_grad)
        elif what == "lr":
            opt.param_groups[0]["lr"] = float(rng.choice([1e-3, 0.02, 0.1]))
        elif what == "weight_decay":
            opt.param_groups[0]["weight_decay"] = float(rng.choice([0.0, 1e-2]))
        elif what == "momentum" and "momentum" in opt.param_groups[0]:
            opt.param_groups[0]["momentum"] = 0.0 if opt.param_groups[0]["momentum"] else 0.9
        elif what == "add_group" and not self.grouped:
            opt.add_param_group({"params": [model.extra]})
            self.grouped = True
        elif what == "inplace":
            with plugtorch.no_grad():
                pick.mul_(0.9)
        elif what == "replace_data":
            pick.data = pick.detach().clone() * 1.01
        elif what == "replace_parameter":
            model.fc2.bias = nn.Parameter(model.fc2.bias.detach().clone())
        elif what == "replace_module":
            model.drop = nn.Dropout(0.25)
        elif what == "dropout_p" and isinstance(model.drop, nn.Dropout):
            model.drop.p = float(rng.choice([0.1, 0.5]))
        elif what == "zero_grad_none":
            opt.zero_grad(set_to_none=True)
        elif what == "zero_grad_zeros":
            opt.zero_grad(set_to_none=False)
        elif what == "grad_none":
            pick.grad = None

    def parameter_argument(self, k: int):
        """fc1's weight, (8, 6), as the argument: itself, or its array as a tensor without grad
        (the same guard key as a batch of 8 rows)."""
        w = self.model.fc1.weight
        return w if k % 2 else w.detach()

    def call(self, x, y, no_grad: bool):
        if no_grad:
            with plugtorch.no_grad():
                return self.run(x, y)
        return self.run(x, y)

    def state(self) -> dict:
        model, opt = self.model, self.opt
        out = {}
        for name, p in list(model.named_parameters()) + [("extra", model.extra)]:
            out[name] = p.detach().numpy()
            out[name + ".requires_grad"] = p.requires_grad
            out[name + "._version"] = p._version  # autograd's in-place check sees what eager did
            out[name + ".grad"] = None if p.grad is None else p.grad.numpy()
        for name, b in model.named_buffers():
            out["buffer " + name] = b.numpy()
        for i, s in enumerate(opt.state.values()):
            for k, v in s.items():
                out[f"opt {i} {k}"] = v.numpy() if isinstance(v, plugtorch.Tensor) else v
        out["training"] = [m.training for m in model.modules()]
        return out


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


def _outcome(world: World, x, y, no_grad: bool):
    try:
        out = world.call(x, y, no_grad)
    except Exception as e:  # eager's errors must be the compiled call's errors
        return ("raised", type(e).__name__)
    return ("ok", out.detach().numpy() if isinstance(out, plugtorch.Tensor) else out)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_compiled_calls_equal_eager_ones_under_perturbations(data):
    spec = Spec(seed=data.draw(st.integers(0, 2**16), label="seed"),
                batchnorm=data.draw(st.booleans(), label="batchnorm"),
                dropout=data.draw(st.booleans(), label="dropout"),
                optimizer=data.draw(st.sampled_from(["sgd", "adam", "amsgrad"]), label="optimizer"),
                kind=data.draw(st.sampled_from(KINDS), label="kind"),
                zero_inside=data.draw(st.booleans(), label="zero_inside"))
    calls = data.draw(st.lists(st.lists(st.sampled_from(PERTURBATIONS), max_size=3), min_size=3, max_size=10),
                      label="perturbations before each call")
    eager, compiled = World(spec, False), World(spec, True)
    batch = 4
    for k, before in enumerate(calls):
        if "batch" in before:
            batch = {3: 4, 4: 8, 8: 3}[batch]  # 8: the rows of fc1.weight, which may be an argument
        outcomes = []
        for world in (eager, compiled):
            plugtorch.manual_seed(1000 + k)  # both worlds draw the same numbers (dropout, new modules)
            rng = np.random.default_rng(k)
            for what in before:
                world.perturb(what, rng)
            x = plugtorch.from_numpy(rng.standard_normal((batch, 6)).astype(np.float32))
            y = plugtorch.from_numpy(rng.standard_normal((batch, 3)).astype(np.float32))
            if spec.kind == "pair":
                y = plugtorch.from_numpy(rng.standard_normal((batch, 6)).astype(np.float32))
                if "alias" in before:
                    y = x
                if "parameter_argument" in before:
                    x = world.parameter_argument(k)
                    y = y[:1].expand(8, 6)
            elif "parameter_argument" in before:
                x = world.parameter_argument(k)
                y = plugtorch.from_numpy(rng.standard_normal((8, 3)).astype(np.float32))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # fallbacks to eager warn; they are allowed
                outcomes.append(_outcome(world, x, y, "no_grad" in before))
        (kind_e, value_e), (kind_c, value_c) = outcomes
        where = f"call {k} after {before} ({spec}); compiled: {compiled.run!r}"
        assert kind_e == kind_c, f"eager {outcomes[0]}, compiled {outcomes[1]} at {where}"
        assert _same(value_e, value_c) if kind_e == "ok" else value_e == value_c, f"results differ at {where}"
        state_e, state_c = eager.state(), compiled.state()
        assert state_e.keys() == state_c.keys(), where
        for key in state_e:
            assert _same(state_e[key], state_c[key]), f"{key} differs at {where}"
