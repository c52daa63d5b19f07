"""The Optuna study of a sweep: its storage (SQLite by default, PostgreSQL for many workers, with heartbeats and
retries), its sampler, the baseline and grid points queued before anything is sampled, and each trial's config."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import re
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc

from tuner.config import RESTART_HEADS, Experiment, Search, StartConfig, split_key
from tuner.errors import UserError
from tuner.sweep.space import baseline_params, config_from_params, grid, suggest
from tuner.sweep.trial_attrs import TrialAttrs, read, state

DEFAULT_TRIALS = 20
MAX_RETRY = 2  # a trial whose worker died is run again at most this often


def default_storage(experiment: Experiment) -> str:
    path = experiment.output_dir / experiment.name / "study.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path.resolve()}"


def check_sqlite_file(url: str) -> None:
    """Refuse an existing SQLite file that is corrupt or holds something other than Optuna studies."""
    if not url.startswith("sqlite:///"):
        return
    path = Path(url.removeprefix("sqlite:///"))
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise UserError.single(str(path), f"not a readable SQLite database ({exc}); nothing was changed") from None
    if tables and "studies" not in tables:
        raise UserError.single(
            str(path),
            "this SQLite file is not an Optuna study database (it holds "
            f"{', '.join(sorted(tables)[:5])}); nothing was changed",
        )


SCHEMA_RACE_ATTEMPTS = 5
"""Opening attempts when a concurrent process is creating the same new storage's schema."""


def make_storage(url: str, search: Search) -> optuna.storages.RDBStorage:
    """RDB storage with heartbeats, so a dead worker's trial is failed and retried (at most twice)."""
    check_sqlite_file(url)
    accepted = inspect.signature(optuna.storages.RDBStorage).parameters
    # Optuna 4.9 renamed the callback (and its argument); older releases only know the first names.
    retry_class = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", optuna.storages.RetryFailedTrialCallback)
    callback = (
        "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in accepted else "failed_trial_callback"
    )
    attempt = 0
    while True:
        attempt += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    driver_url(url),
                    heartbeat_interval=search.heartbeat_s,
                    grace_period=search.grace_period_s,
                    **{callback: retry_class(max_retry=MAX_RETRY)},
                )
        except sqlalchemy.exc.IntegrityError as exc:
            # Two processes created the same new storage at once (workers started together, or a reader): the
            # loser's schema-version insert collides with the winner's. The schema exists now; open it again.
            if attempt == SCHEMA_RACE_ATTEMPTS:
                raise storage_error(url, exc) from None
            time.sleep(0.2 * attempt)
        except Exception as exc:  # unreachable server, corrupt or foreign database, bad URL
            raise storage_error(url, exc) from None


def storage_error(url: str, exc: Exception) -> UserError:
    """The error for a storage that cannot be used, on one line (without SQLAlchemy's link to its docs)."""
    reason = re.sub(r"(\\[nt]|\s)+", " ", str(exc).split("(Background on this error")[0]).strip()
    return UserError.single(url, f"cannot open the study storage: {reason}")


def driver_url(url: str) -> str:
    """``postgresql://`` through psycopg2 when psycopg 3 (SQLAlchemy's default) is not installed."""
    psycopg2_only = not importlib.util.find_spec("psycopg") and importlib.util.find_spec("psycopg2")
    if url.startswith("postgresql://") and psycopg2_only:
        return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def uses_grid(search: Search) -> bool:
    if search.sampler == "grid":
        return True
    return search.sampler == "auto" and search.categorical and len(grid(search.space)) <= (search.n_trials or 64)


def make_sampler(search: Search) -> optuna.samplers.BaseSampler:
    def constraints(trial: optuna.trial.FrozenTrial) -> list[float]:
        return list(read(trial).get("constraints", [0.0]))

    if uses_grid(search) or search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=search.seed)  # grid points are enqueued; nothing is sampled
    if search.sampler == "nsga2" or (search.sampler == "auto" and len(search.objectives) > 1):
        return optuna.samplers.NSGAIISampler(seed=search.seed, constraints_func=constraints)
    return optuna.samplers.TPESampler(seed=search.seed, constraints_func=constraints)


def open_study(
    experiment: Experiment, storage: str | optuna.storages.RDBStorage, *, resume: bool, study_name: str
) -> optuna.Study:
    search = require_search(experiment)
    if isinstance(storage, str):
        storage = make_storage(storage, search)
    exists = study_name in {s.study_name for s in optuna.get_all_study_summaries(storage)}
    if exists and not resume:
        raise UserError.single(
            storage.url,
            f"study {study_name!r} already exists: add --resume to continue it, "
            "or remove the study / pick another --study-name",
        )
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=2) if search.pruner == "median" else optuna.pruners.NopPruner()
    )
    study = optuna.create_study(
        study_name=study_name,
        storage=storage,
        sampler=make_sampler(search),
        pruner=pruner,
        directions=[o.resolved_direction for o in search.objectives],
        load_if_exists=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.metric for o in search.objectives])  # optuna-dashboard labels its axes
    return study


def require_search(experiment: Experiment) -> Search:
    """The experiment's ``search:`` section; without one it cannot be swept."""
    if experiment.search is None:
        raise UserError.single(experiment.name, "the experiment has no `search:` section to sweep", "search")
    return experiment.search


def _queued_points(experiment: Experiment, *, aa: bool) -> list[dict[str, Any]]:
    """The params queued up front: the baseline first, then (grid search only) every other grid point."""
    search = require_search(experiment)
    base = baseline_params(search.space, experiment.engine, experiment.env)
    if uses_grid(search) and not aa:
        return [base, *(p for p in grid(search.space) if p != base)]
    return [base]


def planned_configs(experiment: Experiment) -> list[StartConfig]:
    """The trials a sweep will screen, as far as they are known before it runs: every grid point but the baseline;
    for a sampled space, each of its dimensions' heads alone (a strategy, or one engine/env key at its first
    choice), which shows every way its trials can be measured."""
    search = require_search(experiment)
    points = _queued_points(experiment, aa=False)
    if uses_grid(search):
        return [config_from_params(p) for p in points[1:]]
    base = points[0]
    configs = []
    for key, spec in search.space.items():
        head, param = split_key(key)
        if param is None and isinstance(spec, list) and True in spec:
            configs.append(StartConfig(strategies={head: {}}))
        elif head in RESTART_HEADS and isinstance(spec, list) and len(spec) > 1:
            other = next(v for v in spec if v != base.get(key))
            configs.append(config_from_params({key: other}))
    return configs


def planned_trials(experiment: Experiment, *, aa: bool) -> int:
    """Finished trials that complete the study: the whole grid, else ``search.n_trials``."""
    search = require_search(experiment)
    if uses_grid(search) and not aa:
        return len(_queued_points(experiment, aa=aa))
    return search.n_trials or DEFAULT_TRIALS


def enqueue_missing(study: optuna.Study, experiment: Experiment, *, aa: bool) -> int:
    """Queue the baseline (and every grid point) not yet finished or queued; return the trials still to run."""
    taken = [
        t.params or t.system_attrs.get("fixed_params", {})
        for t in study.get_trials(deepcopy=False)
        if state(t).is_done() or not state(t).is_finished()
    ]
    wanted = _queued_points(experiment, aa=aa)
    for params in wanted:
        if params not in taken:
            study.enqueue_trial(params, user_attrs=dict(TrialAttrs(baseline=params == wanted[0])))
            taken.append(params)
    done = sum(state(t).is_done() for t in study.get_trials(deepcopy=False))
    return max(planned_trials(experiment, aa=aa) - done, 0)


def trial_config(trial: optuna.Trial, search: Search, *, aa: bool) -> StartConfig:
    """What ``trial`` runs. The baseline is vLLM as installed, whatever the space allows (e.g. a strategy fixed on):
    its params were enqueued for the record and are not asked from the space, whose choices may not include them.
    A/A trials run the baseline too."""
    if aa:
        return StartConfig()
    if read(trial)["baseline"]:
        if _baseline_fits(search.space):  # its params on record, for Optuna's samplers and importance
            suggest(trial, search.space)
        return StartConfig()
    return config_from_params(suggest(trial, search.space))


def _baseline_fits(space: dict[str, Any]) -> bool:
    """Whether the baseline's params (every toggle off; engine values are checked at load) are choices of the
    space, so that Optuna accepts them."""
    return all(False in spec for key, spec in space.items() if split_key(key)[1] is None and isinstance(spec, list))
