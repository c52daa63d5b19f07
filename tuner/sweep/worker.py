"""``tuner worker``: one of many processes, on one or many machines, running the trials of one shared study.

Optuna does the distribution: the study lives in an RDB storage (PostgreSQL; SQLite on one machine),
``study.optimize`` claims queued trials atomically, heartbeats mark the trial of a worker that died as
failed after the grace period, and Optuna's retry callback queues it again (see ``make_storage``).
The worker adds two things, both under a lock held in the storage itself:

- the first worker to arrive creates the study and queues the baseline and every grid point; a worker
  arriving at the same time waits for the lock and finds them queued, so no point is queued twice;
- before each trial it decides whether there is anything to claim. Without that, ``study.optimize`` would
  sample a fresh point once the grid queue is empty (a duplicate); and a worker must stay while another
  worker's trial is running, to retry it if that worker dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import time
import warnings
from pathlib import Path
from typing import IO, Literal, Protocol

import optuna
import sqlalchemy

from tuner.config import Experiment
from tuner.errors import UserError
from tuner.feedback import SILENT, Feedback
from tuner.sweep.run import require_complete, write_summary
from tuner.sweep.study import (
    driver_url,
    enqueue_missing,
    make_storage,
    open_study,
    planned_trials,
    require_search,
    storage_error,
    uses_grid,
)
from tuner.sweep.summary import shared_dir
from tuner.sweep.trial_attrs import record, state
from tuner.sweep.trials import Sweep

WAITING = optuna.trial.TrialState.WAITING
RUNNING = optuna.trial.TrialState.RUNNING


class StudyLock(Protocol):
    """A lock all workers of a study share, whatever machine they run on."""

    def acquire(self) -> None: ...

    def release(self) -> None:
        """Release the lock if this worker holds it (safe to call again)."""


class _AdvisoryLock:
    """A PostgreSQL session-level advisory lock, held on a connection of its own (freed if the worker dies)."""

    def __init__(self, url: str, study_name: str) -> None:
        digest = hashlib.blake2b(f"tuner-study:{study_name}".encode(), digest_size=8).digest()
        self._key = int.from_bytes(digest, "big", signed=True)
        self._url = url
        try:
            self._engine = sqlalchemy.create_engine(driver_url(url), poolclass=sqlalchemy.pool.NullPool)
        except ImportError as exc:
            raise UserError.single(url, f"{exc}: pip install 'vllm-hosttune[postgres]'") from None
        self._connection: sqlalchemy.Connection | None = None

    def acquire(self) -> None:
        try:
            self._connection = self._engine.connect()
            self._connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self._key})
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise storage_error(self._url, exc) from None

    def release(self) -> None:
        if self._connection is None:
            return
        connection, self._connection = self._connection, None
        with contextlib.suppress(sqlalchemy.exc.SQLAlchemyError):  # closing the session frees the lock anyway
            connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
        connection.close()


class _FileLock:
    """An exclusive ``flock`` on a file next to the SQLite database (all workers on one machine)."""

    def __init__(self, url: str, path: Path) -> None:
        self._url = url
        self._path = path
        self._file: IO[bytes] | None = None

    def acquire(self) -> None:
        try:
            self._file = self._path.open("ab")
        except OSError as exc:
            raise storage_error(self._url, exc) from None
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def study_lock(url: str, study_name: str) -> StudyLock:
    """The lock for ``study_name`` in the storage at ``url``: advisory on PostgreSQL, a file lock on SQLite.

    It does not need Optuna's tables: the first workers to arrive create those under it, too.
    """
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except sqlalchemy.exc.ArgumentError as exc:
        raise storage_error(url, exc) from None
    if parsed.get_backend_name() == "postgresql":
        return _AdvisoryLock(url, study_name)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return _FileLock(url, Path(f"{parsed.database}.{study_name}.lock"))
    raise UserError.single(url, "workers share a study through PostgreSQL (or an SQLite file on one machine)")


def join_study(experiment: Experiment, url: str, study_name: str) -> tuple[optuna.Study, StudyLock]:
    """Create (or join) the study and queue what is missing of the baseline and the grid, under the lock.

    Returns the study and its lock. Optuna's tables are created under the lock too: two workers creating
    them at once on a fresh PostgreSQL database collide.
    """
    lock = study_lock(url, study_name)
    lock.acquire()
    try:
        storage = make_storage(url, require_search(experiment))
        study = open_study(experiment, storage, resume=True, study_name=study_name)
        enqueue_missing(study, experiment, aa=False)
    finally:
        lock.release()
    return study, lock


Step = Literal["claim", "wait", "stop"]


class ClaimGate:
    """Decides under the study lock, before each trial, whether this worker claims one, waits or stops.

    On "claim" the lock stays held until ``study.optimize`` has popped the trial (``claimed``), so no other
    worker takes the last queued trial in between. Finished means COMPLETE or PRUNED, as Optuna's
    ``MaxTrialsCallback`` counts; the gate also knows when nothing is claimable, which that callback does not.
    """

    def __init__(self, study: optuna.Study, experiment: Experiment, lock: StudyLock, feedback: Feedback) -> None:
        search = require_search(experiment)
        self.study = study
        self.lock = lock
        self.feedback = feedback
        self.total = planned_trials(experiment, aa=False)
        self.grid = uses_grid(search)
        self.poll_s = float(search.heartbeat_s)

    def next(self) -> bool:
        """Wait until there is a trial to claim (True, the lock held) or the study needs no more (False)."""
        self.lock.acquire()
        try:
            announced = False
            while (step := self._step()) == "wait":
                if not announced:
                    self.feedback.note("waiting for trials running on other workers (retried if a worker dies)")
                    announced = True
                self.lock.release()
                time.sleep(self.poll_s)
                self.lock.acquire()
        except BaseException:
            self.lock.release()
            raise
        if step == "stop":
            self.lock.release()
        return step == "claim"

    def claimed(self) -> None:
        self.lock.release()

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """Optuna callback after each trial: stop the study for this worker unless it claims another."""
        if not self.next():
            study.stop()

    def _step(self) -> Step:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)  # a dead worker's trial: failed, queued again
        trials = self.study.get_trials(deepcopy=False)
        states = [t.state for t in trials]
        if sum(state(t).is_done() for t in trials) >= self.total:
            return "stop"
        started = len(states) - states.count(WAITING)
        if WAITING in states or (not self.grid and started < self.total):
            return "claim"
        return "wait" if RUNNING in states else "stop"


class WorkerSweep(Sweep):
    """A sweep whose trials are claimed through the gate, each marked with the worker that ran it."""

    def __init__(self, experiment: Experiment, study: optuna.Study, feedback: Feedback, gate: ClaimGate) -> None:
        super().__init__(experiment, study, feedback)
        self.gate = gate
        self.name = f"{socket.gethostname()}-{os.getpid()}"

    def objective(self, trial: optuna.Trial) -> list[float]:
        self.gate.claimed()
        record(trial, {"worker": self.name})
        return super().objective(trial)


def run_worker(
    experiment: Experiment, feedback: Feedback = SILENT, *, storage: str, study_name: str | None = None
) -> Path:
    """Run trials of the shared study until it is done; write this worker's summary and return its folder."""
    study, lock = join_study(experiment, storage, study_name or experiment.name)
    gate = ClaimGate(study, experiment, lock, feedback)
    sweep = WorkerSweep(experiment, study, feedback, gate)
    out_dir = shared_dir(experiment) / sweep.name
    try:
        if gate.next():
            sweep.run(None, callbacks=[gate])
        else:
            feedback.note("nothing left to claim: every trial of this study is finished or taken")
    finally:  # also on Ctrl-C (even one that lands while the engine closes): what finished is summarised and kept
        try:
            sweep.close()
        finally:
            lock.release()
            summary = write_summary(study, experiment, sweep, out_dir, feedback)
    require_complete(summary)
    return out_dir
