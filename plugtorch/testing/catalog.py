"""The op catalog as Markdown, generated from the registry: ``python -m plugtorch.testing.catalog``.

Lists every registered op (the core's and any installed plugin's) with where it is
exposed, whether it is differentiable, which backends have a kernel of their own
for it, and how many conformance samples check it; then the backend primitives.
"""
from __future__ import annotations

import sys

import plugtorch
from plugtorch.core.primitives import PRIMITIVES

from .sample import Sample, samples_for

_SECTIONS = {
    "elementwise": "Elementwise", "pointwise": "Elementwise", "reduce": "Reductions", "statistics": "Reductions", "sorting": "Sorting",
    "shape": "Shape and movement", "movement": "Shape and movement", "index": "Indexing",
    "scatter": "Indexing",
    "inplace": "Indexing", "linalg": "Linear algebra", "einsum": "Linear algebra",
    "activation": "Activations", "conv": "Convolution and pooling",
}


def _section_of() -> dict:
    from plugtorch.core import ops
    out = {}
    for module in ops.MODULES:
        key = module.__name__.rsplit(".", 1)[-1]
        for op in module.OPS:
            out[op.name] = _SECTIONS.get(key, key.capitalize())
    return out


def _exposed(name: str) -> str:
    where = []
    if callable(getattr(plugtorch, name, None)):
        where.append(f"`plugtorch.{name}`")
    if callable(getattr(plugtorch.Tensor, name, None)):
        where.append(f"`Tensor.{name}`")
    try:
        import plugtorch.nn.functional as F
        if callable(getattr(F, name, None)):
            where.append(f"`nn.functional.{name}`")
    except ImportError:
        pass
    return ", ".join(where) or "internal"


def _kind(op) -> str:
    if op.decompose is not None:
        return "composite" + (" + rule" if op.derivative is not None else "")
    return "primitive-backed"


def _differentiable(op, samples) -> str:
    # a rule, or a sample whose gradient the suite checks (compositions need no rule of their own)
    checked = any(s.grad and s.raises is None and any(a.dtype.kind == "f" for a in s.arrays())
                  for s in samples)
    return "yes" if op.derivative is not None or checked else "no"


def markdown() -> str:
    reg = plugtorch.get_registry()
    sections = _section_of()
    backends = [b for b in reg.backends.values() if b.available]
    lines = [
        "# Op catalog",
        "",
        "Generated from the registry by `python -m plugtorch.testing.catalog > docs/ops.md`; do not edit by hand.",
        "",
        "Every op below is checked on every available backend by the conformance suite "
        "(`tests/conformance`, built on `plugtorch.testing`): forward values, dtypes and shapes "
        "against PyTorch and NumPy, gradcheck in float64, 0-d and empty inputs. Plugin authors run the "
        "same suite on their backends and ops: see [conformance.md](conformance.md).",
        "",
        "*Kind*: **primitive-backed** ops call backend primitives directly (with a derivative rule "
        "where they are differentiable); "
        "**composite** ops are written with other ops (autograd differentiates them), and "
        "**composite + rule** ones also carry a rule, used when a backend registers a fused kernel "
        "or when the core runs the decomposition as a single graph node. "
        "*Own kernels*: backends that registered a kernel for the op itself.",
        "",
    ]
    by_section: dict = {}
    for name in sorted(reg.ops):
        op = reg.ops[name]
        title = sections.get(name) if op.plugin == "plugtorch.core" else f"From plugin `{op.plugin}`"
        by_section.setdefault(title or "Other", []).append(op)
    order = list(dict.fromkeys(_SECTIONS.values())) + sorted(k for k in by_section if k not in _SECTIONS.values())
    for title in order:
        ops = by_section.get(title)
        if not ops:
            continue
        lines += [f"## {title}", "",
                  "| op | exposed as | kind | gradient | own kernels | samples | description |",
                  "|---|---|---|---|---|---|---|"]
        for op in ops:
            kernels = [b.name for b in backends if op.name in b.kernels and op.name not in PRIMITIVES]
            samples = [s for s in samples_for(op) if isinstance(s, Sample)]
            doc = " ".join((op.doc or "").split()).replace("|", "\\|")
            lines.append(f"| `{op.name}` | {_exposed(op.name)} | {_kind(op)} | {_differentiable(op, samples)} "
                         f"| {', '.join(kernels) or '-'} | {len(samples)} | {doc} |")
        lines.append("")
    lines += ["## Backend primitives (the plugin contract)", "",
              "What a backend implements (`plugtorch.core.primitives`); everything above is built on these.", "",
              "| primitive | " + " | ".join(b.name for b in backends) + " | meaning |",
              "|---|" + "---|" * len(backends) + "---|"]
    for name, text in PRIMITIVES.items():
        have = " | ".join("yes" if name in b.primitives else "**missing**" for b in backends)
        lines.append(f"| `{name}` | {have} | {' '.join(text.split()).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
