"""The op catalog as Markdown, generated from the registry: ``python -m plugtorch.testing.catalog``.

Lists every registered op (the core's and any installed plugin's) with where it is exposed,
how it computes, whether it is differentiable, each implementation the backends provide for
it and the tests that hold them to it, and how many conformance samples check it; then the
backend primitives.

The implementations come from what each plugin *declares*, not from what happens to be
registered on the machine that runs this (the NumPy backend's C kernels register only where
the extension was built, the CuPy backend's only where a GPU answers), so the catalog reads the
same everywhere. A plugin declares them in a module attribute::

    PLUGTORCH_KERNELS = {backend name: {op name: (kinds, test)}}

``kinds`` names the kernels it has for the op in the order dispatch prefers them (``"C"``,
``"NumPy"``, ``"CUDA `softmax.cu`"``); each but the last may be missing where it runs (not
built, or not taking those operands) and the next one serves instead, ``None`` standing for
the op's own declaration. ``test`` is the test that holds those kernels to the op beside the
conformance kit ("" for none). A registered kernel no declaration mentions is listed as well.

``--check`` compares ``docs/ops.md`` with what this prints and fails when they differ.
"""
from __future__ import annotations

import pathlib
import sys

import plugtorch
from plugtorch.core.primitives import PRIMITIVES
from plugtorch.func._batching import RULES as BATCHING_RULES

from .sample import Sample, samples_for

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ops.md"
COMMAND = "python -m plugtorch.testing.catalog > docs/ops.md"
KIT = "[kit](conformance.md)"


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


def declared_kernels() -> dict[str, dict[str, tuple[tuple[str | None, ...], str]]]:
    """backend -> op -> (kinds, test), from every loaded plugin's ``PLUGTORCH_KERNELS``."""
    from plugtorch.core.plugins import get_plugin_manager
    declared: dict[str, dict[str, tuple[tuple[str | None, ...], str]]] = {}
    for _, plugin in get_plugin_manager().list_name_plugin():
        for backend, ops in (getattr(plugin, "PLUGTORCH_KERNELS", None) or {}).items():
            declared.setdefault(backend, {}).update(ops)
    return declared


def _own(op) -> str:
    """The op's own declaration, in a word: what serves it where a backend has no kernel."""
    if op.primitive is not None:
        return "primitive"
    return "lowering" if op.lower is not None else "composite"


def _implementations(op, reg, declared) -> tuple[str, list[str]]:
    """The kernels cell (``backend: C (NumPy fallback)``; ...) and the tests behind it."""
    cells, tests = [], []
    registered = {b for (name, b) in reg.kernels if name == op.name and reg.kernel_is_active(name, b)}
    for backend in sorted(registered | {b for b, ops in declared.items() if op.name in ops}):
        kinds, test = declared.get(backend, {}).get(op.name, (("kernel",), ""))
        names = [k if k is not None else _own(op) for k in kinds]
        text = names[0] + (f" ({', then '.join(names[1:])} fallback)" if len(names) > 1 else "")
        cells.append(f"`{backend}`: {text}")
        if test and test not in tests:
            tests.append(test)
    return "; ".join(cells), tests


def _link(test: str) -> str:
    return f"[{test.rsplit('/', 1)[-1]}](../{test})"


def markdown() -> str:
    from plugtorch.core.ops import SECTIONS
    reg = plugtorch.get_registry()
    declared = declared_kernels()
    lines = [
        "# Op catalog",
        "",
        f"Generated from the registry by `{COMMAND}`; do not edit by hand "
        "(`python -m plugtorch.testing.catalog --check` fails when it is stale).",
        "",
        "Every op below is checked on every available backend by the conformance kit "
        "(`tests/conformance`, built on `plugtorch.testing`): forward values, dtypes and shapes "
        "against PyTorch and NumPy, gradcheck in float64, 0-d and empty inputs. Plugin authors run the "
        "same suite on their backends and ops: see [conformance.md](conformance.md).",
        "",
        "Every row is one declaration in the op table (`plugtorch.core.optable`): the op's function "
        "(its signature is torch's), how it computes, its derivative and its dtype policy. "
        "*Computes as*: the backend **primitive** it maps to, a lowering onto primitives, or a "
        "**composite** of other ops (autograd differentiates it), where **+ rule** means the op "
        "carries its own derivative (one graph node; a backend kernel for it stays differentiable). "
        "*jvp*: where its forward-mode derivative (`plugtorch.autograd.forward_ad`) comes from: its own "
        "**rule**, its decomposition run on dual tensors (**via decomposition**), or its reverse rule "
        "transposed (**via vjp**); **—** for an op with no derivative. *vmap*: how `plugtorch.func.vmap` "
        "computes the op on a batch: its batching **rule** (one call on the whole batch) or a **loop** "
        "over the examples, stacked. "
        "*Kernels*: what each backend provides for the op itself, which dispatch prefers to its "
        "declaration, as the backend declares it (`PLUGTORCH_KERNELS`), whether or not it can run "
        "on the machine that generated this page: **C** (the NumPy backend's optional extension), "
        "**NumPy** (a fused NumPy kernel), **CUDA** (a hand-written `.cu` source of the CuPy backend), "
        "each with the *fallback* that serves where it is missing or does not take the operands. "
        "Ops marked *no kernels* return views or several tensors, so kernels for them are refused "
        "with the reason. *Tested by*: the conformance kit, on whatever serves the op, and the tests "
        "that hold the kernels to the op's declaration (the CUDA sources run on the CPU there).",
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
                  "| op | exposed as | computes as | gradient | jvp | vmap | dtypes | kernels | tested by "
                  "| samples | description |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for op in ops:
            kernels, tests = _implementations(op, reg, declared)
            if op.kernel_refusal:
                kernels, tests = "*no kernels*", []
            samples = [s for s in samples_for(op) if isinstance(s, Sample)]
            doc = " ".join(op.summary().split()).replace("|", "\\|")
            lines.append(f"| `{op.name}` | {_exposed(op)} | {op.describe_kind()} | "
                         f"{_differentiable(op, samples)} | {op.describe_jvp()} | "
                         f"{'rule' if op.name in BATCHING_RULES else 'loop'} | {op.dtypes or '-'} | "
                         f"{kernels or '-'} | "
                         f"{', '.join([KIT] + [_link(t) for t in tests])} | {len(samples)} | {doc} |")
        lines.append("")
    lines += ["## Backend primitives (the plugin contract)", "",
              "What a backend implements (`plugtorch.core.primitives`); everything above is built on these. "
              "`plugtorch plugins` shows, op by op, what serves it on each backend of the machine it runs on.", "",
              "| primitive | meaning |",
              "|---|---|"]
    for name, text in PRIMITIVES.items():
        lines.append(f"| `{name}` | {' '.join(text.split()).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != markdown():
            print(f"{DOC} is stale: regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
