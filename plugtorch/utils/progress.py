"""A one-line terminal progress bar: epoch progress, ETA, running loss and throughput.

Silent off a terminal (a log file or CI gets only the epoch lines), and it redraws at most
``rate_hz`` times a second, so ``update`` costs well under a microsecond between draws.
Hand-written rather than tqdm, on the evidence of ``benchmarks/progress_bar.py`` (numbers
in docs/training.md): an update costs about the same in both (~0.1-0.2 us, nothing beside a
~1 ms training step), but tqdm writes its bar into logs unless configured not to, adds an
import to every start and would be a dependency for one line of output.
"""
from __future__ import annotations

import sys
import time


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


class ProgressBar:
    """``bar.update(n_samples, loss)`` per step, ``bar.close()`` at the end.

    Draws only when enabled and the stream is a terminal, and at most ``rate_hz``
    times a second, so it costs nothing measurable in a training loop.
    """

    def __init__(self, total_steps: int, desc: str = "", stream=None, enabled: bool = True,
                 width: int = 24, rate_hz: float = 8.0):
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled and callable(isatty) and isatty()
        self.total, self.desc, self.width = max(total_steps, 1), desc, width
        self.interval = 1.0 / rate_hz
        self.steps = self.samples = 0
        self.loss = float("nan")
        self.start = self._last = time.perf_counter()
        self._drawn = 0  # length of the last line drawn, to blank it on close

    def update(self, samples: int, loss: float | None = None) -> None:
        self.steps += 1
        self.samples += samples
        if loss is not None:
            self.loss = loss
        if self.enabled:
            now = time.perf_counter()
            if now - self._last >= self.interval or self.steps == self.total:
                self._last = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        frac = min(self.steps / self.total, 1.0)
        filled = int(frac * self.width)
        elapsed = max(now - self.start, 1e-9)
        eta = elapsed / self.steps * (self.total - self.steps)
        bar = "#" * filled + "." * (self.width - filled)
        line = (f"{self.desc} [{bar}] {self.steps}/{self.total} {_clock(elapsed)}<{_clock(eta)} "
                f"loss {self.loss:.4f} {self.samples / elapsed:,.0f} samples/s")
        self.stream.write("\r" + line + " " * max(self._drawn - len(line), 0))
        self.stream.flush()
        self._drawn = len(line)

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
