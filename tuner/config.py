"""Experiment files: pydantic models and the YAML loader.

Every failure, whether YAML syntax, unknown key, wrong type, impossible value or unknown engine argument,
becomes a :class:`~tuner.errors.UserError` whose lines name the file, the line and the field.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tuner.errors import Problem, UserError
from tuner.search_space import Range, Search, split_key

BUILTIN_PREFIX = "builtin:"
BUILTIN_DIR = Path(__file__).parent / "models"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FixedLen(_Strict):
    dist: Literal["fixed"]
    value: int = Field(ge=1)

    @property
    def max(self) -> int:
        return self.value


class UniformLen(_Strict):
    dist: Literal["uniform"]
    low: int = Field(ge=1)
    high: int = Field(ge=1)

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
    mean: float = Field(gt=0)
    std: float = Field(ge=0)
    low: int = Field(1, ge=1, description="samples are clipped to [low, high]")
    high: int | None = Field(None, ge=1)

    @property
    def max(self) -> int:
        return self.high if self.high is not None else math.ceil(self.mean + 4 * self.std)


LengthDist = Annotated[FixedLen | UniformLen | NormalLen, Field(discriminator="dist")]


class Sampling(_Strict):
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    ignore_eos: bool = True
    seed: int | None = None


class Workload(_Strict):
    num_prompts: int = Field(64, ge=1)
    input_len: LengthDist = FixedLen(dist="fixed", value=32)
    output_len: LengthDist = FixedLen(dist="fixed", value=64)
    rate: float = Field(math.inf, gt=0, description="requests/s; inf submits everything at once (offline)")
    arrival: Literal["poisson", "fixed"] = "poisson"
    concurrency: int | None = Field(None, ge=1, description="cap on requests in flight (streams)")
    sampling: Sampling = Sampling()
    seed: int = 0

    @field_validator("rate", mode="before")
    @classmethod
    def _parse_inf(cls, value: Any) -> Any:
        return math.inf if isinstance(value, str) and value.strip().lower() in {"inf", "infinity"} else value

    @property
    def streaming(self) -> bool:
        """Offline batch (like `vllm bench throughput`) unless a rate or a concurrency shapes arrivals."""
        return math.isfinite(self.rate) or self.concurrency is not None


class Measure(_Strict):
    repetitions: int = Field(3, ge=1, le=1000)
    warmup_prompts: int = Field(8, ge=0, description="one untimed batch before the first repetition")


class Experiment(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    engine: dict[str, Any] = Field(default_factory=lambda: {"model": "builtin:opt-tiny"})
    workload: Workload = Workload()
    measure: Measure = Measure()
    strategies: dict[str, dict[str, Any]] = Field(default_factory=dict)
    search: Search | None = None
    output_dir: Path = Path("results")

    @field_validator("strategies", mode="before")
    @classmethod
    def _none_means_defaults(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _lengths_fit(self) -> Experiment:
        max_len = self.engine.get("max_model_len")
        if isinstance(max_len, int):
            needed = self.workload.input_len.max + self.workload.output_len.max
            if needed > max_len:
                raise ValueError(
                    f"input_len + output_len can reach {needed} tokens, more than engine.max_model_len ({max_len})"
                )
        return self


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


def _field_name(loc: tuple[int | str, ...]) -> str:
    # Drop pydantic's union-tag segments (e.g. "uniform") that are not keys in the file.
    parts = [str(p) for p in loc if p not in {"fixed", "uniform", "normal"}]
    return ".".join(parts)


def _problems_from_validation(exc: ValidationError, root: yaml.Node | None) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        problems.append(Problem(message, _field_name(loc), _node_line(root, loc)))
    return problems


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Parse ``path``; return the data and its node tree (for line numbers)."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError.single(file, "file not found") from None
    except IsADirectoryError:
        raise UserError.single(file, "is a directory, not an experiment file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError.single(file, f"cannot read: {exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        raise UserError.single(file, f"YAML syntax error: {reason}", line=line) from None
    if data is None:
        raise UserError.single(file, "the file is empty")
    if not isinstance(data, dict):
        raise UserError.single(file, f"expected a mapping of keys at the top, got {type(data).__name__}", line=1)
    return data, root


def load_experiment(path: Path | str) -> Experiment:
    """Load and validate an experiment file (engine args and strategies included)."""
    path = Path(path)
    data, root = read_yaml(path)
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        raise UserError(str(path), _problems_from_validation(exc, root)) from None
    problems = check_engine_args(experiment.engine, root) + check_strategies(experiment.strategies, root)
    if experiment.search is not None:
        problems += check_search(experiment.search, experiment.engine, root)
    if problems:
        raise UserError(str(path), problems)
    return experiment


def check_engine_args(engine: dict[str, Any], root: yaml.Node | None) -> list[Problem]:
    """Engine args must be ``EngineArgs`` fields, and a local model dir must hold a ``config.json``."""
    from tuner.vllm_env import engine_arg_names  # imports vLLM lazily (and says which extra is missing)

    problems = []
    known = engine_arg_names()
    for key in engine:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            line = _node_line(root, ("engine", key))
            problems.append(Problem(f"not a vLLM engine argument{hint}", f"engine.{key}", line))
    model = engine.get("model")
    if not isinstance(model, str) or not model:
        problems.append(
            Problem(
                "required: a builtin:NAME, a local model directory or a hub id",
                "engine.model",
                _node_line(root, ("engine", "model")),
            )
        )
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
    path = Path(model).expanduser()
    looks_local = model.startswith((".", "/", "~")) or path.exists()
    if looks_local:
        if not path.is_dir():
            return f"model directory {model} does not exist"
        if not (path / "config.json").is_file():
            return f"model directory {model} has no config.json"
    return None


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
            elif isinstance(spec, list) and tail in engine and engine[tail] not in spec:
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
                    param.validate(int(value) if param.kind == "int" and isinstance(value, float) else value)
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
