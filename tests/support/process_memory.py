"""Another process's resident memory, sampled in a thread while a block runs (psutil)."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import psutil  # type: ignore[import-untyped]

MIB = 2**20


def rss(pid: int) -> int:
    """The process's resident set size now, in bytes."""
    return int(psutil.Process(pid).memory_info().rss)


@dataclass
class RssSampler:
    """`peak` is the largest RSS of `pid` seen while the `with` block ran."""

    pid: int
    interval: float = 0.02
    baseline: int = 0
    peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RssSampler:
        process = psutil.Process(self.pid)
        self.baseline = self.peak = int(process.memory_info().rss)

        def sample() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(psutil.Error):
                    self.peak = max(self.peak, int(process.memory_info().rss))
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def growth(self) -> int:
        """Peak minus the RSS at the start, in bytes."""
        return self.peak - self.baseline
