"""What is plugged in, and what serves each op: ``plugtorch.plugins()`` and ``plugtorch plugins``.

For every plugin: where it came from (package, version, entry point, contract) and
whether it loaded (with the traceback when it failed). For every backend: whether it
is available, and why not. For every op: who defines it, and on each backend what
computes it — a plugin's kernel, the primitive its definition maps to, a lowering
onto primitives, or its decomposition — plus the kernels that are registered but do
not serve it (their plugin's definition was overridden).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .plugins import get_registry, plugin_records

__all__ = ["PluginsReport", "plugins"]


@dataclass
class PluginsReport:
    plugins: list[dict] = field(default_factory=list)
    backends: list[dict] = field(default_factory=list)
    ops: dict[str, dict] = field(default_factory=dict)

    @property
    def failed(self) -> list[dict]:
        return [p for p in self.plugins if p["status"] == "failed"]

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def __str__(self) -> str:
        lines = ["Plugins:"]
        for p in self.plugins:
            origin = ", ".join(x for x in (
                f"{p['distribution']} {p['version'] or ''}".strip() if p["distribution"] else None,
                f"entry point '{p['entry_point']}'" if p["entry_point"] else None,
                f"module {p['module']}" if p["module"] and not p["entry_point"] else None,
                f"contract {p['contract']}" if p["contract"] is not None else None) if x)
            lines.append(f"  {p['name']:<24} {p['status']:<12} {p['source']}" + (f" ({origin})" if origin else ""))
            if p["error"]:
                lines += ["      " + line for line in p["error"].rstrip().splitlines()]
        lines.append("Backends:")
        for b in self.backends:
            state = "available" if b["available"] else f"unavailable: {b['unavailable_reason']}"
            memory = "host memory" if b["host_memory"] else "device memory"
            aliases = f" (aliases {', '.join(b['aliases'])})" if b["aliases"] else ""
            lines.append(f"  {b['name']:<24} {state}; {memory}; from {b['plugin']}{aliases}")
        lines.append("Ops (defined by; on each backend, what computes it):")
        for name, op in self.ops.items():
            lines.append(f"  {name}  [{op['defined_by']}{', overridden' if op['overridden'] else ''}]")
            for backend, served in op["backends"].items():
                inactive = (f"; registered but not serving: {', '.join(served['inactive'])}"
                            if served["inactive"] else "")
                lines.append(f"      {backend:<20} {served['served_by']}{inactive}")
        return "\n".join(lines)


def _served_by(reg, op_name: str, backend) -> dict:
    d = reg.ops[op_name]
    inactive = [k.plugin for (op, b), k in reg.kernels.items()
                if op == op_name and b == backend.name and not reg.kernel_is_active(op_name, b)]
    if reg.kernel_is_active(op_name, backend.name):
        served = f"kernel from {reg.kernels[(op_name, backend.name)].plugin}"
    elif d.primitive is not None:
        served = (f"primitive '{d.primitive}'" if d.primitive in backend.primitives
                  else f"MISSING: needs primitive '{d.primitive}'")
    elif d.lower is not None:
        served = "lowering onto primitives"
    elif d.decompose is not None:
        served = "decomposition" + (" (one node, own derivative)" if d.derivative is not None else "")
    else:
        served = "MISSING: no kernel and no decomposition"
    return {"served_by": served, "inactive": inactive}


def plugins(op: str | None = None) -> PluginsReport:
    """The report: every plugin, backend and op (or only ``op``)."""
    reg = get_registry()
    report = PluginsReport()
    report.plugins = [asdict(r) for r in plugin_records().values()]
    for b in reg.backends.values():
        report.backends.append({"name": b.name, "plugin": b.plugin, "available": b.available,
                                "unavailable_reason": b.unavailable_reason, "host_memory": b.host_memory,
                                "aliases": list(b.aliases)})
    names = sorted(reg.ops) if op is None else [op]
    for name in names:
        if name not in reg.ops:
            raise KeyError(f"no op named '{name}' is registered (plugtorch plugins lists them all)")
        d = reg.ops[name]
        report.ops[name] = {
            "defined_by": d.plugin, "overridden": name in reg.overridden,
            "computes_as": d.describe_kind(), "kernels_refused": d.kernel_refusal or None,
            # what computes the op where it can run (an unavailable backend is listed above, with why)
            "backends": {b.name: _served_by(reg, name, b) for b in reg.backends.values() if b.available},
        }
    return report


def main(as_json: bool, op: str | None) -> int:
    """``plugtorch plugins [--json] [--op NAME]``."""
    try:
        report = plugins(op)
    except KeyError as e:
        print(f"plugtorch plugins: error: {e.args[0]}")
        return 2
    print(report.to_json() if as_json else report)
    return 0
