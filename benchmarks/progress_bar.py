"""Evidence for the progress-bar choice: plugtorch's hand-written bar against tqdm.

    python benchmarks/progress_bar.py

Measures, for each: the cost of one ``update`` (drawing to a terminal at the default rate,
and off a terminal), the bytes written to a non-terminal (a log file, CI), and the time
``import`` adds to a process start. A training step of the MNIST MLP takes about a
millisecond, so anything under a microsecond per update is free.
"""
from __future__ import annotations

import io
import subprocess
import sys
import time

from plugtorch.utils.progress import ProgressBar

STEPS = 200_000


class Terminal(io.StringIO):
    def isatty(self):
        return True


def per_update(make, steps: int = STEPS) -> float:
    bar = make()
    start = time.perf_counter()
    for _ in range(steps):
        bar.update(128, 0.5)
    seconds = time.perf_counter() - start
    bar.close()
    return seconds / steps * 1e9


def import_ms(module: str, repeats: int = 5) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(repeats)]
    return min(runs) * 1e3


def main() -> None:
    rows = [("plugtorch ProgressBar, terminal",
             per_update(lambda: ProgressBar(STEPS, "epoch 1/1", stream=Terminal()))),
            ("plugtorch ProgressBar, not a terminal",
             per_update(lambda: ProgressBar(STEPS, "epoch 1/1", stream=io.StringIO())))]
    log = io.StringIO()
    bar = ProgressBar(2000, "epoch 1/1", stream=log, rate_hz=1e9)
    for _ in range(2000):
        bar.update(128, 0.5)
    ours_log = len(log.getvalue())
    try:
        from tqdm import tqdm
    except ImportError:
        print("tqdm is not installed (pip install tqdm): only plugtorch's bar measured")
        tqdm = None
    if tqdm is not None:
        class Tqdm:  # the same call shape as ProgressBar.update
            def __init__(self, stream, disable=False):
                self.bar = tqdm(total=STEPS, desc="epoch 1/1", file=stream, mininterval=0.125,
                                disable=disable)

            def update(self, samples, loss):
                self.bar.update(1)

            def close(self):
                self.bar.close()
        rows += [("tqdm, terminal", per_update(lambda: Tqdm(Terminal()))),
                 ("tqdm default, not a terminal", per_update(lambda: Tqdm(io.StringIO()))),
                 ("tqdm disable=None, not a terminal",
                  per_update(lambda: Tqdm(io.StringIO(), disable=None)))]
        log = io.StringIO()
        t = tqdm(total=2000, file=log, mininterval=0)
        for _ in range(2000):
            t.update(1)
        t.close()
        tqdm_log = len(log.getvalue())
    print(f"{'update cost':40s} ns/update")
    for name, ns in rows:
        print(f"{name:40s} {ns:8.0f}")
    print(f"\nbytes written to a log file over 2000 steps: plugtorch {ours_log}, "
          + (f"tqdm (defaults) {tqdm_log}" if tqdm is not None else "tqdm n/a"))
    if tqdm is not None:
        print(f"import time tqdm adds to a process start: {import_ms('tqdm'):.0f} ms "
              "(the hand-written bar is part of plugtorch: nothing extra)")


if __name__ == "__main__":
    main()
