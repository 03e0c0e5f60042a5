"""Run benchmarks/bench_steps.py (or another benchmark file of the same form) with each library in
a process of its own, then all in one, and print the medians, the plugtorch / PyTorch ratios and
each process's peak RSS.

    python benchmarks/compare_steps.py                 # 1 BLAS thread
    python benchmarks/compare_steps.py --threads 1,2 --json steps.json
    python benchmarks/compare_steps.py --bench bench_models.py --libs plugtorch,torch --threads 1,2

The machine is shared: the load average is printed with each run, and a loaded machine
should be measured again.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
LIBS = ("plugtorch", "torch", "numpy")


def thread_env(threads: int) -> dict:
    """This process's environment for a measured child: ``threads`` BLAS/OpenMP threads, no BENCH_LIB."""
    env = {k: v for k, v in os.environ.items() if k != "BENCH_LIB"}
    env.update({v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    return env


def run(lib: str | None, threads: int, bench: str = "bench_steps.py") -> dict:
    """name[param] -> (median seconds, peak RSS MiB) from one pytest-benchmark process."""
    env = thread_env(threads)
    if lib:
        env["BENCH_LIB"] = lib
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "b.json"
        subprocess.run([sys.executable, "-m", "pytest", str(HERE / bench), "-q", "-p", "no:cacheprovider",
                        f"--benchmark-json={out}"], env=env, check=True, capture_output=True, cwd=HERE.parent)
        data = json.loads(out.read_text())
    return {b["name"].removeprefix("test_"): (b["stats"]["median"], b["extra_info"].get("peak_rss_mib"))
            for b in data["benchmarks"]}


def table(results: dict, title: str) -> str:
    cases: dict = {}
    for key, value in results.items():   # "mlp_plugtorch[64]", "mlp_numpy_floor[64]", "cnn_torch", "torch[gpt]"
        name, _, param = key.partition("[")
        model, _, lib = name.partition("_")
        if not lib:  # bench_models.py: the library is the name, the model the parameter
            lib, model, param = model, param.rstrip("]"), ""
            if lib.endswith("compiled"):
                lib, model = lib.removesuffix("compiled"), model + "compiled"
        cases.setdefault(model + (f"[{param}" if param else ""), {})[lib.removesuffix("_floor")] = value
    rows = [title, f"{'step':<16}{'plugtorch ms':>14}{'torch ms':>10}{'numpy ms':>10}{'pt/torch':>10}"
                   f"{'pt MiB':>8}{'torch MiB':>10}"]
    for case, libs in sorted(cases.items()):
        base = case.replace("compiled", "")  # a compiled step is compared with eager PyTorch
        if base != case and "torch" in cases.get(base, {}):
            libs = {**libs, "torch": cases[base]["torch"]}
        ms = {lib: libs[lib][0] * 1e3 for lib in LIBS if lib in libs}
        mib = {lib: libs[lib][1] for lib in LIBS if lib in libs}
        ratio = f"{ms['plugtorch'] / ms['torch']:.2f}" if {"plugtorch", "torch"} <= ms.keys() else "-"
        cells = [f"{ms[lib]:.3f}" if lib in ms else "-" for lib in LIBS]
        rows.append(f"{case:<16}{cells[0]:>14}{cells[1]:>10}{cells[2]:>10}{ratio:>10}"
                    f"{mib.get('plugtorch', '-')!s:>8}{mib.get('torch', '-')!s:>10}")
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1", help="comma-separated BLAS thread counts")
    p.add_argument("--json", help="write every median and peak RSS here")
    p.add_argument("--bench", default="bench_steps.py", help="the benchmark file, in benchmarks/")
    p.add_argument("--libs", default=",".join(LIBS), help="comma-separated libraries to run apart")
    args = p.parse_args(argv)
    everything = {}
    for threads in (int(t) for t in args.threads.split(",")):
        separate: dict = {}
        for lib in args.libs.split(","):
            separate.update(run(lib, threads, args.bench))
        together = run(None, threads, args.bench)
        load = os.getloadavg()[0]
        print(table(separate, f"\n{threads} thread(s), each library in its own process (load {load:.2f})"))
        print(table(together, f"\n{threads} thread(s), all in one process"))
        everything[threads] = {"separate": separate, "one_process": together, "load": load}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
