"""Experiment files: pydantic models and the YAML loader.

Every failure, whether YAML syntax, unknown key, wrong type, impossible value or unknown engine argument,
becomes a :class:`~tuner.errors.UserError` whose lines name the file, the line and the field.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tuner.engine_args import BUILTIN_DIR, BUILTIN_PREFIX
from tuner.errors import Problem, UserError
from tuner.inputs import read_regular
from tuner.search_space import Range, Scalar, Search, split_key, yaml_kind
from tuner.traffic.dataset import Dataset

MAX_TOKENS = 1 << 24  # longer than any model's context
MAX_PROMPTS = 10_000_000
MAX_FILE_BYTES = 1 << 20
MAX_EXPANDED_NODES = 100_000  # values in the document once aliases are expanded
REQUEST_OVERHEAD_BYTES = 8 << 10  # per request: vLLM's Request and sampling state, our timing record


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FixedLen(_Strict):
    dist: Literal["fixed"]
    value: int = Field(ge=1, le=MAX_TOKENS)

    @property
    def max(self) -> int:
        return self.value


class UniformLen(_Strict):
    dist: Literal["uniform"]
    low: int = Field(ge=1, le=MAX_TOKENS)
    high: int = Field(ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLen:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self

    @property
    def max(self) -> int:
        return self.high


class NormalLen(_Strict):
    dist: Literal["normal"]
    mean: float = Field(gt=0, le=MAX_TOKENS)
    std: float = Field(ge=0, le=MAX_TOKENS)
    low: int = Field(1, ge=1, le=MAX_TOKENS, description="samples are clipped to [low, high]")
    high: int | None = Field(None, ge=1, le=MAX_TOKENS)

    @property
    def max(self) -> int:
        return self.high if self.high is not None else math.ceil(self.mean + 4 * self.std)


LengthDist = Annotated[FixedLen | UniformLen | NormalLen, Field(discriminator="dist")]


class Sampling(_Strict):
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    ignore_eos: bool = True
    seed: int | None = Field(None, ge=0, le=2**63 - 1)


class Workload(_Strict):
    num_prompts: int = Field(64, ge=1, le=MAX_PROMPTS)
    input_len: LengthDist = FixedLen(dist="fixed", value=32)
    output_len: LengthDist = FixedLen(dist="fixed", value=64)
    rate: float = Field(
        math.inf, gt=0, allow_inf_nan=True, description="requests/s; inf submits everything at once (offline)"
    )
    arrival: Literal["poisson", "fixed"] = "poisson"
    concurrency: int | None = Field(None, ge=1, description="cap on requests in flight (streams)")
    sampling: Sampling = Sampling()
    seed: int = Field(0, ge=0, description="numpy takes no negative seeds")
    dataset: Dataset | None = Field(None, description="requests from a file instead of the synthetic ones")

    @field_validator("rate", mode="before")
    @classmethod
    def _parse_inf(cls, value: Any) -> Any:
        return math.inf if isinstance(value, str) and value.strip().lower() in {"inf", "infinity"} else value

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.dataset is None:
            return self
        synthetic = [k for k in ("num_prompts", "input_len", "output_len", "arrival") if k in self.model_fields_set]
        if synthetic:
            raise ValueError(
                f"{', '.join(synthetic)}: for synthetic requests only; with a dataset its file gives the requests "
                "(dataset.num_prompts selects how many)"
            )
        if self.dataset.schedule == "trace" and math.isfinite(self.rate):
            raise ValueError("rate and dataset.schedule: trace both set arrival times: keep one")
        return self

    @property
    def streaming(self) -> bool:
        """Offline batch (like `vllm bench throughput`) unless a rate, a concurrency or a trace's schedule shapes
        arrivals."""
        trace = self.dataset is not None and self.dataset.schedule == "trace"
        return math.isfinite(self.rate) or self.concurrency is not None or trace


class Slo(_Strict):
    """Per-request latency targets; a request meeting all of them counts towards goodput."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2e_ms: float | None = Field(None, gt=0)


class Measure(_Strict):
    repetitions: int = Field(3, ge=1, le=1000)
    warmup_prompts: int = Field(8, ge=0, le=MAX_PROMPTS, description="one untimed batch before the first repetition")
    slo: Slo = Field(Slo(), description="targets for goodput_requests_per_s (like `vllm bench serve --goodput`)")


class Serve(_Strict):
    """``mode: serve``: measure through vLLM's OpenAI-compatible HTTP server."""

    endpoint: str | None = Field(
        None, description="base URL of a server already running (measured from outside); none: the tuner starts one"
    )
    ready_timeout_s: float = Field(600, gt=0, description="how long the started server may take to become healthy")
    args: list[str] = Field(default_factory=list, description="extra command-line arguments for the server")

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s/]+/?", value):
            raise ValueError(f"must be a base URL like http://127.0.0.1:8000, got {value!r}")
        return value.rstrip("/") if value is not None else None


class Experiment(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    engine: dict[str, Any] = Field(default_factory=lambda: {"model": "builtin:opt-tiny"})
    mode: Literal["engine", "serve"] = Field(
        "engine", description="engine: vLLM in this process (LLMEngine/AsyncLLM); serve: over HTTP"
    )
    serve: Serve = Serve()
    workload: Workload = Workload()
    measure: Measure = Measure()
    strategies: dict[str, dict[str, Scalar | None]] = Field(default_factory=dict)
    search: Search | None = None
    output_dir: Path = Path("results")

    @property
    def serving(self) -> Serve | None:
        """The server settings in ``mode: serve``, else None."""
        return self.serve if self.mode == "serve" else None

    @model_validator(mode="after")
    def _endpoint_is_measured_as_is(self) -> Experiment:
        if self.serve != Serve() and self.mode != "serve":
            raise ValueError("a `serve:` section needs `mode: serve`")
        if self.mode == "serve" and self.serve.endpoint is not None:
            switched = sorted(self.strategies) + sorted(self.search.space if self.search else ())
            if switched:
                raise ValueError(
                    f"serve.endpoint is a server the tuner did not start: it cannot apply or search {switched} "
                    "(leave serve.endpoint out to let the tuner start the server)"
                )
        return self

    @field_validator("strategies", mode="before")
    @classmethod
    def _none_means_defaults(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value


# ---------------------------------------------------------------------------------------------- loading


def _node_line(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (or of its deepest existing parent)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if getattr(k, "value", None) == str(key)), None)
            key_node = next((k for k, _ in node.value if getattr(k, "value", None) == str(key)), None)
            if match is None:
                return line
            node, line = match, (key_node or match).start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _locate(loc: tuple[int | str, ...], data: Any, error_type: str) -> tuple[tuple[int | str, ...], str]:
    """Where a pydantic error is in the file, and its field name (``a.b[0].c``).

    Drops pydantic's own ``loc`` segments (union members, tags, ``[key]``), which are no keys in the file.
    """
    kept: list[int | str] = []
    field = ""
    node = data
    for index, key in enumerate(loc):
        is_index = isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)
        if is_index or (isinstance(node, dict) and key in node):
            node = node[key]
        elif not (error_type == "missing" and index == len(loc) - 1):  # a missing field is named, not in the file
            continue
        kept.append(key)
        field += f"[{key}]" if is_index else f".{key}" if key != "" else '.""'  # an empty key shows as ""
    return tuple(kept), field.removeprefix(".")


def _problems_from_validation(exc: ValidationError, data: Any, root: yaml.Node | None) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors():
        loc, field = _locate(tuple(err["loc"]), data, err["type"])
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["loc"][-1:] == ("[key]",):
            message = f"keys must be strings, got {yaml_kind(err['input'])}"
        elif err["type"].endswith("_type"):  # "Input should be a valid integer": say what it is instead
            message = f"{err['msg']}, got {yaml_kind(err['input'])}"
        else:
            message = err["msg"].removeprefix("Value error, ")
        problem = Problem(message, field, _node_line(root, loc))
        if problem not in problems:
            problems.append(problem)
    return problems


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys; a scalar it cannot convert is a YAML error with a line."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as exc:  # e.g. `2001-02-30`
            what = f"{node.value!r} " if isinstance(node, yaml.ScalarNode) else ""
            reason = f": {exc}" if isinstance(exc, ValueError) else ""  # the others say nothing useful
            message = f"cannot read {what}as {node.tag.rpartition(':')[2]}{reason}"
            raise yaml.constructor.ConstructorError(None, None, message, node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):  # e.g. `!!set 5`: the base class refuses it
            return super().construct_mapping(node, deep)
        first_lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden by design
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = first_lines.get(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if first is not None:
                message = f"duplicate key {key!r} (first on line {first})"
                raise yaml.constructor.ConstructorError(None, None, message, key_node.start_mark)
            first_lines[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def _yaml_problem(exc: yaml.YAMLError, text: str) -> Problem:
    """One line for what PyYAML refused, with the line it refused."""
    if isinstance(exc, yaml.reader.ReaderError):
        message = f"YAML does not allow the character {chr(exc.character)!r} ({exc.reason})"
        return Problem(message, line=text.count("\n", 0, exc.position) + 1)
    mark = getattr(exc, "problem_mark", None)
    line = None if mark is None else mark.line + 1
    reason = ", ".join(part for part in (getattr(exc, "context", None), getattr(exc, "problem", None)) if part)
    if isinstance(exc, yaml.constructor.ConstructorError):
        return Problem(reason, line=line)
    return Problem(f"YAML syntax error: {reason or exc}", line=line)


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many nodes ``root`` stands for once every alias is expanded (counting stops past ``limit``).

    PyYAML composes an alias as a second reference to the same node, so the document is a graph whose
    expansion can be exponential in its size (a "billion laughs"); sizes are memoised per node.
    """
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = limit + 1  # a node that contains itself expands without end
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total = min(total + size(child), limit + 1)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                total = min(total + size(key) + size(value), limit + 1)
        sizes[id(node)] = total
        return total

    return size(root)


def _parse(text: str, file: str = "<experiment>") -> tuple[Any, yaml.Node | None]:
    """The data and the node tree (for line numbers) of one YAML document, parsed once.

    Refuses a document whose aliases expand past :data:`MAX_EXPANDED_NODES` values anywhere in it, free-form
    engine args included, before anything is built from it.
    """
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is not None and _expanded_size(root, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
            raise UserError.single(
                file,
                f"the document expands to more than {MAX_EXPANDED_NODES:,} values (YAML aliases): "
                "not an experiment file",
            )
        return (None if root is None else loader.construct_document(root)), root
    finally:
        loader.dispose()


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Parse ``path``; return the data and its node tree (for line numbers)."""
    file = str(path)
    try:
        raw = read_regular(path, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError.single(file, "file not found") from None
    except IsADirectoryError:
        raise UserError.single(file, "is a directory, not an experiment file") from None
    except OSError as exc:
        raise UserError.single(file, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError.single(file, f"larger than {MAX_FILE_BYTES >> 20} MiB: not an experiment file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded"
        raise UserError.single(file, message, line=raw.count(b"\n", 0, exc.start) + 1) from None
    try:
        data, root = _parse(text, file)
    except yaml.YAMLError as exc:
        raise UserError(file, [_yaml_problem(exc, text)]) from None
    except RecursionError:
        raise UserError.single(file, "YAML nested too deeply") from None
    if data is None:
        raise UserError.single(file, "no experiment: the file is empty or only comments")
    if not isinstance(data, dict):
        message = f"expected a mapping of keys at the top, got {yaml_kind(data)}"
        raise UserError.single(file, message, line=_node_line(root, ()))
    return data, root


def load_experiment(path: Path | str) -> Experiment:
    """Load and validate an experiment file (engine args and strategies included)."""
    path = Path(path)
    data, root = read_yaml(path)
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        raise UserError(str(path), _problems_from_validation(exc, data, root)) from None
    problems = check_engine_args(experiment.engine, root) + check_strategies(experiment.strategies, root)
    problems += check_lengths(experiment, root) + check_workload_memory(experiment.workload, root)
    if experiment.search is not None:
        problems += check_search(experiment.search, experiment.engine, root)
    if not problems and experiment.serve.endpoint is None:
        problems = check_engine_configs(experiment, root)
    if not problems:
        problems = check_dataset(experiment, root)
    if problems:
        raise UserError(str(path), problems)
    return experiment


def check_engine_configs(experiment: Experiment, root: yaml.Node | None) -> list[Problem]:
    """Every engine config the experiment can start must pass vLLM's own config validation (ranges, cross-field
    rules): the experiment's engine args, and each engine value of the search space on top of them. Each strategy
    must act on the code path vLLM resolves for them (model runner, scheduling, executor, parallelism)."""
    from strategies import strategy_classes
    from tuner.engine_args import engine_config, resolve_engine_args

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
    problems = []
    for args, loc, field in candidates:
        config, refused = engine_config(resolve_engine_args(args))
        if refused is not None:
            arg, reason = refused
            if field == "engine" and arg in experiment.engine:
                loc, field = ("engine", arg), f"engine.{arg}"
            problems.append(Problem(f"vLLM refuses this engine config: {reason}", field, _node_line(root, loc)))
            continue
        for name, where, named in used:
            why = classes[name]().refuses(config) if name in classes else None
            on = "" if field == "engine" else f" (with {field})"
            problem = Problem(f"does not act on this engine's code path{on}: {why}", named, _node_line(root, where))
            if why and problem not in problems:
                problems.append(problem)
    return problems


def check_workload_memory(workload: Workload, root: yaml.Node | None) -> list[Problem]:
    """Refuse a synthetic workload whose requests would not fit in memory (a dataset's are checked once read)."""
    if workload.dataset is not None:
        return []
    why = memory_problem(workload.num_prompts, workload.input_len.max, workload.output_len.max)
    return [Problem(why, "workload.num_prompts", _node_line(root, ("workload", "num_prompts")))] if why else []


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
    from tuner.traffic.replay import TokenizerMissing, read_dataset

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
                _node_line(root, where),
            )
        ]
    try:
        dataset = read_dataset(
            spec, seed=experiment.workload.seed, engine=experiment.engine, max_model_len=context_limit(experiment)
        )
    except TokenizerMissing as exc:
        return [Problem(str(exc), "workload.dataset.format", _node_line(root, ("workload", "dataset", "format")))]
    lengths = [(r.input_length or 0, r.output_length or 0) for r in dataset.requests]
    why = memory_problem(len(lengths), max(i for i, _ in lengths), max(o for _, o in lengths))
    return [Problem(why, "workload.dataset.num_prompts", _node_line(root, ("workload", "dataset")))] if why else []


def check_engine_args(engine: dict[str, Any], root: yaml.Node | None) -> list[Problem]:
    """Engine args must be ``EngineArgs`` fields, and a local model dir must hold a ``config.json``."""
    from tuner.engine_args import value_problem
    from tuner.vllm_env import engine_arg_names  # imports vLLM lazily (and says which extra is missing)

    problems = []
    known = engine_arg_names()
    for key, value in engine.items():
        line = _node_line(root, ("engine", key))
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(Problem(f"not a vLLM engine argument{hint}", f"engine.{key}", line))
        elif key != "model" and (refused := value_problem(key, value)):
            problems.append(Problem(f"vLLM refuses {value!r}: {refused}", f"engine.{key}", line))
    model = engine.get("model")
    expected = "a builtin:NAME, a local model directory or a hub id"
    if model is None or model == "":
        problem: str | None = f"required: {expected}"
    elif not isinstance(model, str):
        problem = f"expected {expected}, got {yaml_kind(model)}"
    else:
        problem = _check_model(model)
    if problem:
        problems.append(Problem(problem, "engine.model", _node_line(root, ("engine", "model"))))
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
    from tuner.traffic.replay import model_max_len

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
        Problem(f"input_len + output_len can reach {needed} tokens, more than {limit}", name, _node_line(root, loc))
        for loc, name, limit in _length_limits(experiment)
        if _is_length(limit) and needed > limit
    ]


def check_strategies(strategies: dict[str, dict[str, Any]], root: yaml.Node | None) -> list[Problem]:
    """Each strategy must exist, apply to the installed vLLM, and have valid parameters."""
    from strategies import strategy_classes

    problems = []
    classes = strategy_classes()
    for name, params in strategies.items():
        line = _node_line(root, ("strategies", name))
        cls = classes.get(name)
        if cls is None:
            problems.append(Problem(f"unknown strategy (known: {', '.join(classes)})", f"strategies.{name}", line))
            continue
        verdict = cls().applicable()
        if not verdict.ok:
            reason = f"does not apply to the installed vLLM: {verdict.reason}"
            problems.append(Problem(reason, f"strategies.{name}", line))
            continue
        try:
            cls.resolve_params(params)
        except ValueError as exc:
            problems.append(Problem(str(exc), f"strategies.{name}", line))
    return problems


def check_search(search: Search, engine: dict[str, Any], root: yaml.Node | None) -> list[Problem]:
    """Space keys must name strategies, their parameters or engine args; metrics must exist."""
    from strategies import strategy_classes
    from tuner.engine_args import value_problem
    from tuner.metrics import METRIC_NAMES
    from tuner.vllm_env import engine_arg_names

    problems = []
    classes = strategy_classes()
    toggles = {k for k in search.space if split_key(k)[1] is None}
    for key, spec in search.space.items():
        head, tail = split_key(key)
        line = _node_line(root, ("search", "space", key))
        field = f"search.space.{key}"
        if head == "engine":
            if tail not in engine_arg_names():
                problems.append(Problem("not a vLLM engine argument", field, line))
                continue
            for index, value in enumerate(spec if isinstance(spec, list) else ()):
                refused = value_problem(tail, value)
                if refused:
                    where = _node_line(root, ("search", "space", key, index))
                    problems.append(Problem(f"vLLM refuses {value!r}: {refused}", f"{field}[{index}]", where))
            if isinstance(spec, list) and tail in engine and engine[tail] not in spec:
                problems.append(
                    Problem(f"the baseline value engine.{tail}={engine[tail]!r} must be a choice", field, line)
                )
            continue
        cls = classes.get(head)
        if cls is None:
            problems.append(Problem(f"unknown strategy {head!r} (known: {', '.join(classes)})", field, line))
            continue
        verdict = cls().applicable()
        if not verdict.ok:
            problems.append(Problem(f"does not apply to the installed vLLM: {verdict.reason}", field, line))
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
            line = _node_line(root, ("search", section, index, "metric"))
            problems.append(
                Problem(
                    f"unknown metric {metric!r} (known: {', '.join(METRIC_NAMES)})",
                    f"search.{section}[{index}].metric",
                    line,
                )
            )
    return problems
