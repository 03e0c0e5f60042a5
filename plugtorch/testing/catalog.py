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

def _exposed(op) -> str:
    """Where the op is bound, from the op table's declarations (plus any alias)."""
    from plugtorch.core.optable import API
    where = [f"`{place}.{name}`" for place in API for name, fn in API[place].items()
             if fn is op.function or (place == "Tensor" and op.method is not None and fn is op.method)]
    return ", ".join(where) or "internal"


def _differentiable(op, samples) -> str:
    # a rule, or a sample whose gradient the suite checks (compositions need no rule of their own)
    checked = any(s.grad and s.raises is None and any(a.dtype.kind == "f" for a in s.arrays())
                  for s in samples)
    return "yes" if op.derivative is not None or checked else "no"


def markdown() -> str:
    from plugtorch.core.ops import SECTIONS
    reg = plugtorch.get_registry()
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
        "Every row is one declaration in the op table (`plugtorch.core.optable`): the op's function "
        "(its signature is torch's), how it computes, its derivative and its dtype policy. "
        "*Computes as*: the backend **primitive** it maps to, a lowering onto primitives, or a "
        "**composite** of other ops (autograd differentiates it), where **+ rule** means the op "
        "carries its own derivative (one graph node; a backend kernel for it stays differentiable). "
        "*Own kernels*: backends with a kernel registered for the op itself, which dispatch "
        "prefers. Ops marked *no kernels* return views or several tensors, so kernels for them "
        "are refused with the reason.",
        "",
    ]
    by_section: dict = {}
    for name in sorted(reg.ops):
        op = reg.ops[name]
        title = SECTIONS.get(op.module) if op.plugin == "plugtorch.core" else f"From plugin `{op.plugin}`"
        by_section.setdefault(title or "Other", []).append(op)
    order = list(dict.fromkeys(SECTIONS.values())) + sorted(k for k in by_section if k not in SECTIONS.values())
    for title in order:
        ops = by_section.get(title)
        if not ops:
            continue
        lines += [f"## {title}", "",
                  "| op | exposed as | computes as | gradient | dtypes | own kernels | samples | description |",
                  "|---|---|---|---|---|---|---|---|"]
        for op in ops:
            kernels = ("*no kernels*" if op.kernel_refusal else
                       ", ".join(b.name for b in backends if reg.kernel_is_active(op.name, b.name)) or "-")
            samples = [s for s in samples_for(op) if isinstance(s, Sample)]
            doc = " ".join(op.summary().split()).replace("|", "\\|")
            lines.append(f"| `{op.name}` | {_exposed(op)} | {op.describe_kind()} | "
                         f"{_differentiable(op, samples)} | {op.dtypes or '-'} | {kernels} | {len(samples)} "
                         f"| {doc} |")
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
