"""Where a run's time goes on the bridge's side of its hosts: how many hosts it started and
how long starting them took (forked, and the adapter built), how long each kind of call into
an adapter took (a round trip: the framework's work, and whatever it waited on), and the host
templates it started. A profile reports the figures it added (`since`); `bench/bridge.py`
prints them beside each process's CPU seconds.

Counted from the bridge's threads (`--jobs`), under a lock; seconds of calls that ran side by
side add up, so with N jobs they can exceed the wall time N-fold.
"""

from __future__ import annotations

import threading

import attrs


@attrs.define
class HostStats:
    hosts: int = 0
    host_seconds: float = 0.0  # forking hosts and building their adapters
    calls: dict[str, list] = attrs.Factory(dict)  # method -> [calls, seconds]
    templates: int = 0
    template_seconds: float = 0.0  # starting templates (their preloads)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False, eq=False)

    def host_started(self, seconds: float) -> None:
        with self._lock:
            self.hosts += 1
            self.host_seconds += seconds

    def called(self, method: str, seconds: float) -> None:
        with self._lock:
            count = self.calls.setdefault(method, [0, 0.0])
            count[0] += 1
            count[1] += seconds

    def template_started(self, seconds: float) -> None:
        with self._lock:
            self.templates += 1
            self.template_seconds += seconds

    def snapshot(self) -> HostStats:
        with self._lock:
            return HostStats(
                self.hosts,
                self.host_seconds,
                {method: list(count) for method, count in self.calls.items()},
                self.templates,
                self.template_seconds,
            )

    def since(self, earlier: HostStats) -> HostStats:
        """What was counted after `earlier` (a snapshot of this)."""
        now = self.snapshot()
        calls = {}
        for method, (count, seconds) in now.calls.items():
            before = earlier.calls.get(method, [0, 0.0])
            if count > before[0]:
                calls[method] = [count - before[0], seconds - before[1]]
        return HostStats(
            now.hosts - earlier.hosts,
            now.host_seconds - earlier.host_seconds,
            calls,
            now.templates - earlier.templates,
            now.template_seconds - earlier.template_seconds,
        )

    def as_json(self) -> dict:
        return {
            "hosts": self.hosts,
            "host_start_seconds": round(self.host_seconds, 3),
            "templates": self.templates,
            "template_start_seconds": round(self.template_seconds, 3),
            "calls": {
                method: {"calls": count, "seconds": round(seconds, 3)}
                for method, (count, seconds) in sorted(self.calls.items())
            },
        }
