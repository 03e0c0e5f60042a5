"""A one-line terminal progress bar with a running loss and throughput (silent off a TTY)."""
from __future__ import annotations

import sys
import time


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
        rate = self.samples / max(now - self.start, 1e-9)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.desc} [{bar}] {self.steps}/{self.total} "
                          f"loss {self.loss:.4f} {rate:,.0f} samples/s ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.steps:
            self.stream.write("\r" + " " * (len(self.desc) + self.width + 60) + "\r")
            self.stream.flush()
