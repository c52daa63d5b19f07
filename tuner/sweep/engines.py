"""The sweep's engines: the running one is reused while its start configuration stays the same, another is
started when it changes; a configuration that failed to start is not started again, every start and stop is
timed (restart pairs time each arm's), and a trial that runs past its time limit has its engine killed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from tuner.config import Experiment, StartConfig
from tuner.engine import EngineError, EngineSession
from tuner.measure import Workbench
from tuner.plugin.protocol import StrategySet, encode_spec

BASELINE_START = StartConfig()
"""The experiment's own engine args and environment variables, no strategy in force at start: the baseline's
engine."""


class Engines:
    """One engine at a time for a sweep, started with the plugin able to install ``installable`` strategies."""

    def __init__(
        self, experiment: Experiment, installable: list[str], on_start: Callable[[Workbench], None] = lambda _: None
    ) -> None:
        self.experiment = experiment
        self.installable = installable
        self.on_start = on_start
        self.session: EngineSession | None = None
        self.bench: Workbench | None = None
        self.running: dict[str, dict[str, Any]] | None = None  # how the running engine was started
        self.start_s: list[float] = []
        self.failed_starts: dict[str, str] = {}  # engine config (JSON) -> why it did not start

    def get(self, start: StartConfig = BASELINE_START, *, fresh: bool = False) -> Workbench:
        """The engine ``start`` configures (on top of the experiment's): the running one if it is that engine,
        else (or when ``fresh``) a new start."""
        wanted = {
            "engine": {**self.experiment.engine, **start.engine},
            "env": {**self.experiment.env, **start.env},
            "strategies": start.strategies,
        }
        if self.bench is None or wanted != self.running or fresh:
            self.close()
            key = json.dumps(wanted, sort_keys=True, default=str)
            if key in self.failed_starts:  # the same engine would fail the same way: once per config is enough
                raise EngineError(f"not started again: this engine config failed to start ({self.failed_starts[key]})")
            try:
                self.bench = self.start(wanted["engine"], wanted["env"], start.strategies)
            except EngineError as exc:
                self.failed_starts[key] = str(exc)
                raise
            self.session = self.bench.session
            self.start_s.append(self.session.start_s)
            self.on_start(self.bench)
            self.running = wanted
        return self.bench

    def start(self, engine: dict[str, Any], env: dict[str, Any], strategies: StrategySet) -> Workbench:
        """A new engine of ``engine`` args and ``env`` variables, ``strategies`` in force from its start."""
        return Workbench.start(self.experiment, encode_spec(strategies, self.installable), engine, env)

    def kill(self) -> None:
        """Kill the running engine at once (a trial past its time limit)."""
        if self.session is not None:
            self.session.kill()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = self.bench = None

    def close_timed(self) -> float:
        """Close the running engine; how long its stop took (restart pairs time every arm's)."""
        session = self.session
        self.close()
        if session is None or session.stop_s is None:  # a NaN here would only fail the stop-time estimate later
            raise EngineError("restart pairs asked to stop an engine that was not running")
        return session.stop_s


class Watchdog:
    """Calls ``kill`` once ``limit_s`` have passed since :meth:`arm` (never without a limit).

    The clock starts when :meth:`arm` is called, once the trial's engine is up: starting an engine is not the
    configuration's time (and a new engine is only needed when engine args change).
    """

    def __init__(self, kill: Callable[[], None], limit_s: float | None) -> None:
        self.limit_s = limit_s or 0.0
        self.fired = False
        self._kill = kill
        self._timer = threading.Timer(self.limit_s, self._fire) if limit_s else None
        if self._timer is not None:
            self._timer.daemon = True

    def arm(self) -> None:
        if self._timer is not None:
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._kill()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
