"""Checks of a loaded experiment against the installed vLLM and this machine: engine args, models, strategies,
the search space, lengths, memory and the dataset, each problem located in the file.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from tuner.config.models import REQUEST_OVERHEAD_BYTES, Experiment, Workload
from tuner.config.search import RESTART_HEADS, Range, Search, split_key, yaml_kind
from tuner.config.yaml_source import node_line
from tuner.errors import Problem
from tuner.vllm import BUILTIN_DIR, BUILTIN_PREFIX


def check_engine_configs(experiment: Experiment, root: yaml.Node | None) -> list[Problem]:
    """Every engine config the experiment can start must pass vLLM's own config validation (ranges, cross-field
    rules): the experiment's engine args, and each engine value of the search space on top of them. Each strategy
    must act on the code path vLLM resolves for them (model runner, scheduling, executor, parallelism)."""
    from strategies import strategy_classes
    from tuner.vllm import engine_config, env_overlay, env_text, resolve_engine_args

    candidates: list[tuple[dict[str, Any], tuple[int | str, ...], str]] = [(experiment.engine, ("engine",), "engine")]
    space = experiment.search.space if experiment.search else {}
    for key, spec in space.items():
        head, tail = split_key(key)
        if head != "engine" or tail is None:
            continue
        if isinstance(spec, Range):
            values: list[tuple[Any, int | str]] = [(spec.low, "low"), (spec.high, "high")]
        else:
            values = [(value, index) for index, value in enumerate(spec)]
        for value, index in values:
            if isinstance(value, float) and value.is_integer() and isinstance(spec, Range):
                value = int(value)
            loc: tuple[int | str, ...] = ("search", "space", key, index)
            field = f"search.space.{key}" + (f".{index}" if isinstance(index, str) else f"[{index}]")
            candidates.append(({**experiment.engine, tail: value}, loc, field))
    used: list[tuple[str, tuple[int | str, ...], str]]
    used = [(name, ("strategies", name), f"strategies.{name}") for name in experiment.strategies]
    used += [(key, ("search", "space", key), f"search.space.{key}") for key in space if split_key(key)[1] is None]
    classes = strategy_classes()
    variables = {name: env_text(value) for name, value in experiment.env.items()}
    problems = []
    for args, loc, field in candidates:
        with env_overlay(variables):  # the experiment's vLLM variables, as its engines will run
            config, refused = engine_config(resolve_engine_args(args))
            # Strategies read the variables too (fast_teardown: how vLLM starts its processes).
            why_not = {name: classes[name]().refuses(config) for name, _, _ in used if name in classes and not refused}
        if refused is not None:
            arg, reason = refused
            if field == "engine" and arg in experiment.engine:
                loc, field = ("engine", arg), f"engine.{arg}"
            problems.append(Problem(f"vLLM refuses this engine config: {reason}", field, node_line(root, loc)))
            continue
        for name, where, named in used:
            why = why_not.get(name)
            on = "" if field == "engine" else f" (with {field})"
            problem = Problem(f"does not act on this engine's code path{on}: {why}", named, node_line(root, where))
            if why and problem not in problems:
                problems.append(problem)
    return problems


def check_capacity(experiment: Experiment, root: yaml.Node | None) -> list[Problem]:
    """What ``tuner capacity`` needs of an experiment: a load knob the workload has, an SLO to meet, strategies in
    both arms that exist, and the configuration's engine args and vLLM variables as vLLM takes them."""
    problems = []
    try:
        experiment.load_knob()
    except ValueError as exc:
        where = ("capacity", "load") if experiment.capacity and experiment.capacity.load else ("workload",)
        problems.append(Problem(str(exc), ".".join(map(str, where)), node_line(root, where)))
    slo = experiment.measure.slo
    tiers = experiment.capacity is not None and experiment.capacity.tiers
    if not tiers and slo.ttft_ms is None and slo.tpot_ms is None and slo.e2e_ms is None:
        where = ("measure", "slo") if "slo" in experiment.measure.model_fields_set else ("capacity",)
        message = (
            "capacity is the largest load meeting the SLO: set a target (ttft_ms, tpot_ms or e2e_ms), or capacity.tiers"
        )
        problems.append(Problem(message, "measure.slo", node_line(root, where)))
    if (capacity := experiment.capacity) is not None:
        problems += check_strategies(capacity.in_both_arms, root, ("capacity", "in_both_arms"))
        problems += engine_arg_problems(capacity.engine, root, ("capacity", "engine"))
        problems += check_env(capacity.env, root, ("capacity", "env"))
    return problems


def check_workload_memory(workload: Workload, root: yaml.Node | None) -> list[Problem]:
    """Refuse a synthetic workload whose requests would not fit in memory (a dataset's are checked once read)."""
    if workload.dataset is not None:
        return []
    why = memory_problem(workload.num_prompts, workload.input_len.max, workload.output_len.max)
    return [Problem(why, "workload.num_prompts", node_line(root, ("workload", "num_prompts")))] if why else []


def memory_problem(requests: int, input_max: int, output_max: int) -> str | None:
    """Why ``requests`` of up to these lengths would not fit in memory (None if they do): all of them are built
    before the first one is sent, and vLLM keeps a state per queued request."""
    import psutil

    needed = (REQUEST_OVERHEAD_BYTES + 40 * input_max + 80 * output_max) * requests
    budget = psutil.virtual_memory().total // 2
    if needed <= budget:
        return None
    return (
        f"{requests:,} requests need about {needed / 2**30:.1f} GiB (prompts, timings and vLLM's "
        f"request state), more than half of this machine's {2 * budget / 2**30:.0f} GiB: use fewer prompts "
        "(the same requests are replayed in every repetition)"
    )


def check_dataset(experiment: Experiment, root: yaml.Node | None) -> list[Problem]:
    """Read the dataset as the engine will get it: a bad record or a request longer than the smallest
    ``max_model_len`` the experiment may start with raises :class:`UserError` naming the dataset file's line; a
    text format without a tokenizer, or more requests than memory holds, is a problem of the experiment file."""
    from tuner.traffic import TokenizerMissing, read_dataset

    spec = experiment.workload.dataset
    if spec is None:
        return []
    if not spec.path.is_file():
        state = "is not a regular file" if spec.path.exists() else "file not found"
        where = ("workload", "dataset", "path")
        return [
            Problem(
                f"{spec.path}: {state} (relative paths start at the working directory)",
                "workload.dataset.path",
                node_line(root, where),
            )
        ]
    try:
        dataset = read_dataset(
            spec, seed=experiment.workload.seed, engine=experiment.engine, max_model_len=context_limit(experiment)
        )
    except TokenizerMissing as exc:
        return [Problem(str(exc), "workload.dataset.format", node_line(root, ("workload", "dataset", "format")))]
    lengths = [(r.input_length or 0, r.output_length or 0) for r in dataset.requests]
    why = memory_problem(len(lengths), max(i for i, _ in lengths), max(o for _, o in lengths))
    return [Problem(why, "workload.dataset.num_prompts", node_line(root, ("workload", "dataset")))] if why else []


def check_engine_args(engine: dict[str, Any], root: yaml.Node | None) -> list[Problem]:
    """Engine args must be ``EngineArgs`` fields, and a local model dir must hold a ``config.json``."""
    problems = engine_arg_problems(engine, root)
    model = engine.get("model")
    expected = "a builtin:NAME, a local model directory or a hub id"
    if model is None or model == "":
        problem: str | None = f"required: {expected}"
    elif not isinstance(model, str):
        problem = f"expected {expected}, got {yaml_kind(model)}"
    else:
        problem = _check_model(model)
    if problem:
        problems.append(Problem(problem, "engine.model", node_line(root, ("engine", "model"))))
    return problems


def engine_arg_problems(
    engine: dict[str, Any], root: yaml.Node | None, at: tuple[str, ...] = ("engine",)
) -> list[Problem]:
    """Each engine arg (the mapping at key path ``at``) must be an ``EngineArgs`` field with a value vLLM takes
    (``model`` is :func:`check_engine_args`'s to check)."""
    from tuner.vllm import (
        engine_arg_names,  # imports vLLM lazily (and says which extra is missing)
        value_problem,
    )

    problems = []
    known = engine_arg_names()
    for key, value in engine.items():
        line, name = node_line(root, (*at, key)), ".".join((*at, key))
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(Problem(f"not a vLLM engine argument{hint}", name, line))
        elif key != "model" and (refused := value_problem(key, value)):
            problems.append(Problem(f"vLLM refuses {value!r}: {refused}", name, line))
    return problems


def builtin_models() -> list[str]:
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "config.json").is_file())


def _check_model(model: str) -> str | None:
    if model.startswith(BUILTIN_PREFIX):
        name = model.removeprefix(BUILTIN_PREFIX)
        if name not in builtin_models():
            return f"no bundled model {name!r} (bundled: {', '.join(builtin_models())})"
        return None
    try:
        path = Path(model).expanduser()
        if not (model.startswith((".", "/", "~")) or path.exists()):
            return None  # a hub id
        if not path.is_dir():
            return f"{model} is not a directory" if path.exists() else f"model directory {model} does not exist"
        if not (path / "config.json").is_file():
            return f"model directory {model} has no config.json"
    except (OSError, RuntimeError, ValueError) as exc:  # a name too long, ~nosuchuser, a NUL byte
        return f"not a usable model path: {getattr(exc, 'strerror', None) or exc}"
    return None


def _length_limits(experiment: Experiment) -> list[tuple[tuple[int | str, ...], str, Any]]:
    """Each ``max_model_len`` the experiment may start an engine with: where it is, its field, its value."""
    limits: list[tuple[tuple[int | str, ...], str, Any]] = [
        (("engine", "max_model_len"), "engine.max_model_len", experiment.engine.get("max_model_len"))
    ]
    key, field = ("search", "space", "engine.max_model_len"), "search.space.engine.max_model_len"
    spec = experiment.search.space.get(key[2]) if experiment.search else None
    if isinstance(spec, Range):
        limits.append(((*key, "low"), f"{field}.low", spec.low))
    elif spec is not None:
        limits += [((*key, i), f"{field}[{i}]", value) for i, value in enumerate(spec)]
    return limits


def context_limit(experiment: Experiment) -> int | None:
    """The smallest ``max_model_len`` the experiment may start an engine with (the model's own if none is set):
    dataset requests are held to it, so every engine of a sweep replays the same requests."""
    from tuner.traffic import model_max_len

    limits = [int(value) for _, _, value in _length_limits(experiment) if _is_length(value)]
    return min(limits) if limits else model_max_len(experiment.engine)


def _is_length(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_lengths(experiment: Experiment, root: yaml.Node | None) -> list[Problem]:
    """Synthetic prompt plus output must fit ``engine.max_model_len``, and every ``max_model_len`` the search may
    try (a dataset's requests are checked once read)."""
    workload = experiment.workload
    if workload.dataset is not None:
        return []
    needed = workload.input_len.max + workload.output_len.max
    return [
        Problem(f"input_len + output_len can reach {needed} tokens, more than {limit}", name, node_line(root, loc))
        for loc, name, limit in _length_limits(experiment)
        if _is_length(limit) and needed > limit
    ]


def check_strategies(
    strategies: dict[str, dict[str, Any]], root: yaml.Node | None, at: tuple[str, ...] = ("strategies",)
) -> list[Problem]:
    """Each strategy (the mapping at key path ``at``) must exist, apply to the installed vLLM, and have valid
    parameters."""
    from strategies import strategy_classes

    problems = []
    classes = strategy_classes()
    for name, params in strategies.items():
        line, key = node_line(root, (*at, name)), ".".join((*at, name))
        cls = classes.get(name)
        if cls is None:
            problems.append(Problem(f"unknown strategy (known: {', '.join(classes)})", key, line))
            continue
        verdict = cls().applicable()
        if not verdict.ok:
            problems.append(Problem(f"does not apply to the installed vLLM: {verdict.reason}", key, line))
            continue
        try:
            cls.resolve_params(params)
        except ValueError as exc:
            problems.append(Problem(str(exc), key, line))
    return problems


def check_env(env: dict[str, Any], root: yaml.Node | None, at: tuple[str, ...] = ("env",)) -> list[Problem]:
    """``env:`` names (the mapping at key path ``at``) must be variables of the installed vLLM and their values ones
    vLLM's parser reads."""
    from tuner.vllm import env_problem

    return [
        Problem(why, ".".join((*at, name)), node_line(root, (*at, name)))
        for name, value in env.items()
        if (why := env_problem(name, value))
    ]


def _check_env_dimension(
    key: str, name: str, spec: list[Any] | Range, env: dict[str, Any], root: yaml.Node | None
) -> list[Problem]:
    from tuner.vllm import env_problem

    field = f"search.space.{key}"
    located: list[tuple[int | str, Any]] = (
        [("low", spec.low), ("high", spec.high)] if isinstance(spec, Range) else list(enumerate(spec))
    )
    problems = []
    for index, value in located:
        if why := env_problem(name, value):
            where = node_line(root, ("search", "space", key, index))
            problems.append(Problem(why, field + (f".{index}" if isinstance(index, str) else f"[{index}]"), where))
            if why.startswith("not an environment variable"):
                break
    return problems + _baseline_choice(key, spec, env, root)


def _baseline_choice(key: str, spec: list[Any] | Range, fixed: dict[str, Any], root: yaml.Node | None) -> list[Problem]:
    """The experiment's own value of a restart dimension (``fixed``: its ``engine:`` or ``env:`` block) must be one
    of the dimension's choices: the baseline runs it, and a trial's ratio is against the baseline."""
    head, tail = split_key(key)
    if not isinstance(spec, list) or tail not in fixed or fixed[tail] in spec:
        return []
    line = node_line(root, ("search", "space", key))
    return [Problem(f"the baseline value {head}.{tail}={fixed[tail]!r} must be a choice", f"search.space.{key}", line)]


def check_search(
    search: Search, engine: dict[str, Any], root: yaml.Node | None, env: dict[str, Any] | None = None
) -> list[Problem]:
    """Space keys must name strategies, their parameters, engine args or vLLM environment variables; metrics must
    exist; dimensions compared by restart pairs never go into a comparison by steps."""
    from strategies import strategy_classes
    from tuner.metrics import METRIC_NAMES
    from tuner.vllm import engine_arg_names, value_problem

    problems = []
    classes = strategy_classes()
    toggles = {k for k in search.space if split_key(k)[1] is None}
    for key, spec in search.space.items():
        head, tail = split_key(key)
        line = node_line(root, ("search", "space", key))
        field = f"search.space.{key}"
        if head in RESTART_HEADS and search.method == "steps":
            why = "compared by restart pairs, never per step: use method auto (or runs)"
            problems.append(Problem(f"{head} dimensions are {why}", field, line))
            continue
        if head == "env":
            problems += _check_env_dimension(key, tail or "", spec, env or {}, root)
            continue
        if head == "engine":
            if tail not in engine_arg_names():
                problems.append(Problem("not a vLLM engine argument", field, line))
                continue
            for index, value in enumerate(spec if isinstance(spec, list) else ()):
                refused = value_problem(tail, value)
                if refused:
                    where = node_line(root, ("search", "space", key, index))
                    problems.append(Problem(f"vLLM refuses {value!r}: {refused}", f"{field}[{index}]", where))
            problems += _baseline_choice(key, spec, engine, root)
            continue
        cls = classes.get(head)
        if cls is None:
            problems.append(Problem(f"unknown strategy {head!r} (known: {', '.join(classes)})", field, line))
            continue
        verdict = cls().applicable()
        if not verdict.ok:
            problems.append(Problem(f"does not apply to the installed vLLM: {verdict.reason}", field, line))
        elif not cls.switchable and search.method == "steps":
            reason = f"{head} is compared only by restarting the engine ({cls.run_level_reason}): "
            problems.append(Problem(reason + "use method auto (or runs) for restart pairs", field, line))
        elif tail is None:
            if not isinstance(spec, list) or any(not isinstance(v, bool) for v in spec):
                problems.append(Problem("a strategy toggle takes a list of true/false", field, line))
        elif head not in toggles:
            problems.append(Problem(f"add `{head}: [false, true]` to the space to search its parameters", field, line))
        else:
            param = next((p for p in cls.params if p.name == tail), None)
            if param is None:
                problems.append(Problem(f"strategy {head!r} has no parameter {tail!r}", field, line))
                continue
            values = [spec.low, spec.high] if isinstance(spec, Range) else spec
            for value in values:
                try:
                    param.validate(value)
                except ValueError as exc:
                    problems.append(Problem(str(exc), field, line))
    named = [("objectives", i, o.metric) for i, o in enumerate(search.objectives)]
    named += [("constraints", i, c.metric) for i, c in enumerate(search.constraints)]
    for section, index, metric in named:
        if metric not in METRIC_NAMES:
            line = node_line(root, ("search", section, index, "metric"))
            problems.append(
                Problem(
                    f"unknown metric {metric!r} (known: {', '.join(METRIC_NAMES)})",
                    f"search.{section}[{index}].metric",
                    line,
                )
            )
    return problems
