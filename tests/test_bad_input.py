"""Bad experiment files end in exit status 2 and one ``file:line: field: message`` line per problem.

Every file in ``tests/bad_inputs/`` (its first line says what is wrong) goes through the real CLI, ``tuner run``
and ``tuner sweep``; a few also through a real subprocess. No engine starts: the input is refused first.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tuner.cli.main import app

REPO = Path(__file__).parent.parent
CORPUS = Path(__file__).parent / "bad_inputs"

# file -> (what the message must contain, the line it must name or None)
CASES: dict[str, tuple[str, int | None]] = {
    # wrong types
    "num_prompts_string.yaml": ("workload.num_prompts: Input should be a valid integer", 8),
    "engine_list.yaml": ("engine: Input should be a valid dictionary, got a list", 3),
    "input_len_number.yaml": ("workload.input_len: Input should be a valid dictionary", 8),
    "strategy_params_list.yaml": ("strategies.gc_threshold: Input should be a valid dictionary, got a list", 8),
    "name_number.yaml": ("name: Input should be a valid string, got a number", 2),
    "name_date.yaml": ("name: Input should be a valid string, got date", 2),
    "key_not_string.yaml": ("engine.1: keys must be strings", 5),
    # unknown keys at several depths
    "unknown_top_key.yaml": ("workloads: unknown key", 7),
    "unknown_workload_key.yaml": ("workload.num_prompt: unknown key", 8),
    "unknown_sampling_key.yaml": ("workload.sampling.temp: unknown key", 9),
    "unknown_length_key.yaml": ("workload.input_len.low: unknown key", 8),
    "unknown_pairs_key.yaml": ("search.pairs.maximum: unknown key", 10),
    "unknown_range_key.yaml": ("search.space.engine.max_num_seqs.steps: unknown key", 9),
    # contradictory values
    "uniform_low_above_high.yaml": ("workload.input_len: low (64) must not exceed high (8)", 8),
    "lengths_exceed_max_model_len.yaml": ("engine.max_model_len: input_len + output_len can reach 150 tokens", 5),
    "pairs_min_above_max.yaml": ("search.pairs: min (10) must not exceed max (6)", 10),
    "range_low_above_high.yaml": ("search.space.engine.max_num_seqs: low (64) must be below high (8)", 9),
    "constraint_unknown_metric.yaml": ("search.constraints[0].metric: unknown metric 'latency'", 11),
    "constraint_both_bounds.yaml": ("search.constraints[0]: give exactly one of max or min", 11),
    "objective_unknown_metric.yaml": ("search.objectives[0].metric: unknown metric 'speed'", 11),
    # impossible numbers
    "rate_negative.yaml": ("workload.rate: Input should be greater than 0", 8),
    "rate_zero.yaml": ("workload.rate: Input should be greater than 0", 8),
    "num_prompts_negative.yaml": ("workload.num_prompts: Input should be greater than or equal to 1", 8),
    "seed_negative.yaml": ("workload.seed: Input should be greater than or equal to 0", 8),
    "repetitions_zero.yaml": ("measure.repetitions: Input should be greater than or equal to 1", 8),
    "huge_num_prompts.yaml": ("workload.num_prompts: Input should be less than or equal to 10000000", 8),
    "num_prompts_exceed_memory.yaml": ("workload.num_prompts: 9,999,999 requests need about", 7),
    "huge_strategy_param.yaml": ("strategies.gc_threshold: gen0_per_seq must be <= 4096", 8),
    "huge_search_seed.yaml": ("search.seed: Input should be less than or equal to 4294967295", 10),
    "nan_temperature.yaml": ("workload.sampling.temperature: Input should be a finite number", 8),
    "inf_normal_mean.yaml": ("workload.output_len.mean: Input should be a finite number", 8),
    "inf_constraint.yaml": ("search.constraints[0].max: Input should be a finite number", 11),
    "nan_range.yaml": ("search.space.engine.max_num_seqs.low: Input should be a finite number", 9),
    "inf_choice.yaml": ("search.space.gc_threshold.gen0_per_seq[1]: expected a finite number, got inf", 10),
    # strategies
    "strategy_unknown.yaml": ("strategies.gc_magic: unknown strategy (known: gc_threshold", 8),
    "strategy_not_applicable.yaml": ("strategies.sampler_copy_elision: does not apply to the installed vLLM", 8),
    "strategy_param_out_of_range.yaml": ("strategies.gc_threshold: gen0_per_seq must be <= 4096, got 100000", 8),
    "strategy_param_wrong_type.yaml": ("strategies.gc_threshold: gen0_per_seq must be a number, got 'eight'", 8),
    "strategy_param_fraction.yaml": ("strategies.gc_threshold: gen0_per_seq must be an integer, got 8.5", 8),
    "strategy_param_unknown.yaml": ("strategies.gc_threshold: strategy 'gc_threshold' has no parameter gen3", 8),
    "strategy_param_nested.yaml": ("strategies.gc_freeze.enabled: expected true/false, a number or a string", 9),
    # engine and model
    "engine_arg_unknown.yaml": ("engine.max_num_seq: not a vLLM engine argument (did you mean max_num_seqs?)", 5),
    "engine_arg_markup.yaml": ("engine.[/bold]: not a vLLM engine argument", 5),
    "model_missing.yaml": ("engine.model: required: a builtin:NAME, a local model directory or a hub id", 3),
    "model_number.yaml": (
        "engine.model: expected a builtin:NAME, a local model directory or a hub id, got a number",
        4,
    ),
    "model_builtin_unknown.yaml": ("engine.model: no bundled model 'opt-huge'", 4),
    # engine-arg values, against the installed vLLM's own argument definitions and config validation
    "engine_value_not_int.yaml": ("engine.max_num_seqs: vLLM refuses 'many': invalid int value: 'many'", 5),
    "engine_value_float_for_int.yaml": ("engine.max_num_seqs: vLLM refuses 1e+20: invalid int value: '1e+20'", 5),
    "engine_value_bad_choice.yaml": ("engine.kv_cache_dtype: vLLM refuses 'bogus': invalid choice: 'bogus'", 5),
    "engine_dtype_unknown.yaml": ("engine.dtype: vLLM refuses 'float99': invalid choice: 'float99'", 5),
    "engine_config_refused.yaml": (
        "engine.gpu_memory_utilization: vLLM refuses this engine config: "
        "CacheConfig.gpu_memory_utilization: Input should be less than or equal to 1",
        5,
    ),
    "search_engine_value_refused.yaml": (
        "search.space.engine.max_num_seqs[1]: vLLM refuses 'many': invalid int value: 'many'",
        9,
    ),
    "search_engine_config_refused.yaml": (
        "search.space.engine.gpu_memory_utilization[1]: vLLM refuses this engine config: "
        "CacheConfig.gpu_memory_utilization: Input should be less than or equal to 1",
        9,
    ),
    "model_dir_without_config.yaml": ("engine.model: model directory ./tests/bad_inputs has no config.json", 4),
    "model_dir_missing.yaml": ("engine.model: model directory ./no/such/model does not exist", 4),
    "model_path_too_long.yaml": ("engine.model: not a usable model path: File name too long", 4),
    "model_unknown_user.yaml": ("engine.model: not a usable model path", 4),
    # the search space
    "search_unknown_strategy.yaml": ("search.space.gc_magic: unknown strategy 'gc_magic'", 9),
    "search_not_applicable.yaml": ("search.space.sampler_copy_elision: does not apply to the installed vLLM", 9),
    "env_unknown.yaml": (
        "env.VLLM_USE_FASTOKEN: not an environment variable of the installed vLLM (did you mean VLLM_USE_FASTOKENS?)",
        6,
    ),
    "env_value_unreadable.yaml": ("env.VLLM_USE_V2_MODEL_RUNNER: vLLM refuses 'yes': invalid literal for int()", 6),
    "search_env_rust_frontend.yaml": (
        "search.space.env.VLLM_USE_RUST_FRONTEND[1]: vLLM refuses 1: VLLM_RUST_FRONTEND_PATH=auto but the vllm-rs "
        "binary was not found",
        9,
    ),
    "search_env_unknown.yaml": ("search.space.env.VLLM_SPIN_WINDOW[0]: not an environment variable", 9),
    "search_env_baseline_not_a_choice.yaml": ("the baseline value env.VLLM_USE_V2_MODEL_RUNNER=0 must be a choice", 10),
    "search_restart_dimension_by_steps.yaml": (
        "search.space.engine.max_num_seqs: engine dimensions are compared by restart pairs, never per step",
        10,
    ),
    "strategy_event_wait_on_cpu.yaml": (
        "strategies.event_wait: does not act on this engine's code path: the cpu runner makes no CUDA events",
        8,
    ),
    "search_restart_only.yaml": ("search.space.gc_refreeze: gc_refreeze is compared only by restarting the engine", 10),
    "search_param_without_toggle.yaml": (
        "search.space.gc_threshold.gen0_per_seq: add `gc_threshold: [false, true]`",
        9,
    ),
    "search_param_unknown.yaml": (
        "search.space.gc_threshold.gen3: strategy 'gc_threshold' has no parameter 'gen3'",
        10,
    ),
    "search_param_out_of_range.yaml": ("search.space.gc_threshold.gen0_per_seq: gen0_per_seq must be <= 4096", 10),
    "search_empty_choices.yaml": ("search.space.gc_freeze: List should have at least 1 item", 9),
    "search_empty_space.yaml": ("search.space: Dictionary should have at least 1 item", 8),
    "search_choice_nested.yaml": ("search.space.engine.max_num_seqs[0]: expected true/false, a number or a string", 9),
    "search_entry_scalar.yaml": ("search.space.gc_freeze: expected a list of choices or a range", 9),
    "search_toggle_not_bool.yaml": ("search.space.gc_freeze: a strategy toggle takes a list of true/false", 9),
    "search_unknown_engine_arg.yaml": ("search.space.engine.max_num_seq: not a vLLM engine argument", 9),
    "search_baseline_not_a_choice.yaml": ("the baseline value engine.max_num_seqs=16 must be a choice", 9),
    "search_sampler_unknown.yaml": ("search.sampler: Input should be 'auto', 'grid', 'tpe', 'nsga2' or 'random'", 10),
    # request datasets
    "dataset_with_num_prompts.yaml": ("workload: num_prompts: for synthetic requests only", 7),
    "dataset_trace_with_rate.yaml": ("workload: rate and dataset.schedule: trace both set arrival times", 7),
    "dataset_window_on_text.yaml": ("workload.dataset: start_s: jsonl records have no arrival times", 8),
    "dataset_format_unknown.yaml": (
        "workload.dataset.format: Input should be 'mooncake', 'sharegpt', 'jsonl' or 'burstgpt'",
        10,
    ),
    "dataset_missing_file.yaml": ("workload.dataset.path: no/such/trace.jsonl: file not found", 9),
    "dataset_text_without_tokenizer.yaml": (
        "workload.dataset.format: sharegpt prompts are text and the bundled builtin:opt-tiny has no tokenizer",
        10,
    ),
    "dataset_random_without_count.yaml": ("workload.dataset: sample: random needs num_prompts", 8),
    # capacity
    "capacity_offline_workload.yaml": ("workload: the workload sends everything at once: capacity needs a load", 7),
    "capacity_without_slo.yaml": ("measure.slo: capacity is the largest load meeting the SLO: set a target", 9),
    "capacity_attainment_one.yaml": ("capacity.attainment: Input should be less than 1", 12),
    "capacity_knob_unusable.yaml": ("capacity.load: load concurrency needs workload.concurrency", 12),
    "capacity_start_outside_limits.yaml": ("capacity: start (50) must lie within [min_load, max_load]", 11),
    # YAML itself
    "syntax_unclosed_bracket.yaml": ("YAML syntax error: while parsing a flow mapping, expected ',' or '}'", 5),
    "syntax_bad_indent.yaml": ("YAML syntax error: mapping values are not allowed here", 5),
    "tabs.yaml": ("YAML syntax error: while scanning for the next token, found character '\\t'", 4),
    "only_comment.yaml": ("no experiment: the file is empty or only comments", None),
    "top_level_list.yaml": ("expected a mapping of keys at the top, got a list", 2),
    "top_level_scalar.yaml": ("expected a mapping of keys at the top, got a string", 2),
    "duplicate_key.yaml": ("duplicate key 'workload' (first on line 7)", 9),
    "duplicate_nested_key.yaml": ("duplicate key 'num_prompts' (first on line 8)", 10),
    "multiple_documents.yaml": ("expected a single document in the stream, but found another document", 3),
    "control_character.yaml": ("YAML does not allow the character '\\x07'", 2),
    "invalid_date.yaml": ("cannot read '2024-02-30' as timestamp: day is out of range for month", 2),
    "bad_int_tag.yaml": ("cannot read 'many' as int", 4),
    "deeply_nested.yaml": ("YAML nested too deeply", None),
    "alias_bomb.yaml": ("the document expands to more than 100,000 values (YAML aliases)", None),
    "non_utf8.yaml": ("not UTF-8 text: byte 0xe9 cannot be decoded", 3),
}


def _make_empty(tmp: Path) -> Path:
    (path := tmp / "empty.yaml").write_bytes(b"")
    return path


def _make_symlink_loop(tmp: Path) -> Path:  # unreadable even as root
    (tmp / "a.yaml").symlink_to(tmp / "b.yaml")
    (tmp / "b.yaml").symlink_to(tmp / "a.yaml")
    return tmp / "a.yaml"


def _make_oversized(tmp: Path) -> Path:
    (path := tmp / "huge.yaml").write_text("name: x\n" + "#" * (2 << 20))
    return path


def _make_fifo(tmp: Path) -> Path:  # opening it for reading blocks until a writer comes
    os.mkfifo(path := tmp / "fifo.yaml")
    return path


# name -> (how to make the path in a fresh directory, what the message must contain)
SPECIAL: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty file": (_make_empty, "no experiment: the file is empty or only comments"),
    "directory": (lambda tmp: tmp, "is a directory, not an experiment file"),
    "nonexistent path": (lambda tmp: tmp / "missing.yaml", "file not found"),
    "path through a file": (lambda tmp: _make_empty(tmp) / "x.yaml", "cannot read: Not a directory"),
    "symlink loop": (_make_symlink_loop, "cannot read: Too many levels of symbolic links"),
    "oversized file": (_make_oversized, "larger than 1 MiB: not an experiment file"),
    "endless device": (lambda tmp: Path("/dev/zero"), "cannot read: not a regular file"),
    "FIFO (would block forever)": (_make_fifo, "cannot read: not a regular file"),
}


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root (relative model paths); fail loudly instead of starting an engine."""
    import tuner.capacity.run
    import tuner.run.run
    import tuner.sweep.run

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the input was accepted: an engine would start")

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(tuner.run.run, "run_experiment", refuse)
    monkeypatch.setattr(tuner.sweep.run, "run_sweep", refuse)
    monkeypatch.setattr(tuner.capacity.run, "run_capacity", refuse)


def assert_refused(code: int, stderr: str, output: str, path: Path, expected: str, line: int | None) -> None:
    """Exit 2; every line ``error: FILE[:LINE]: ...``; the expected problem present; no traceback."""
    assert code == 2, output
    assert "Traceback" not in output
    lines = stderr.splitlines()
    assert lines, output
    pattern = re.compile(rf"error: {re.escape(str(path))}(:\d+)?: \S")
    assert all(pattern.match(text) for text in lines), stderr
    assert expected in stderr, stderr
    if line is not None:
        assert any(text.startswith(f"error: {path}:{line}: ") and expected in text for text in lines), stderr


def invoke(command: str, path: Path) -> Result:
    result = CliRunner().invoke(app, [command, str(path)])
    assert isinstance(result.exception, SystemExit), result.exception  # typer.Exit, nothing raised past the CLI
    return result


def test_every_corpus_file_is_in_the_table_and_says_what_is_wrong() -> None:
    files = {path.name: path for path in CORPUS.glob("*.yaml")}
    assert sorted(files) == sorted(CASES)
    assert all(path.read_bytes().startswith(b"# ") for path in files.values())


@pytest.mark.parametrize("command", ["run", "sweep", "calibrate", "capacity"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_file_is_refused_with_a_clear_message(name: str, command: str) -> None:
    path = CORPUS.relative_to(REPO) / name
    result = invoke(command, path)
    assert_refused(result.exit_code, result.stderr, result.output, path, *CASES[name])


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_unusable_path_is_refused_with_a_clear_message(name: str, tmp_path: Path) -> None:
    make, expected = SPECIAL[name]
    path = make(tmp_path)
    result = invoke("run", path)
    assert_refused(result.exit_code, result.stderr, result.output, path, expected, None)


def test_every_problem_in_a_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "many_problems.yaml"
    path.write_text("name: bad\nworkload:\n  num_prompts: -1\n  rate: fast\nmeasure:\n  repetitions: 0\n  extra: 1\n")
    result = invoke("run", path)
    assert_refused(result.exit_code, result.stderr, result.output, path, "workload.num_prompts", 3)
    for expected in ("3: workload.num_prompts", "4: workload.rate", "6: measure.repetitions", "7: measure.extra"):
        assert expected in result.stderr


@pytest.mark.parametrize("name", ["non_utf8.yaml", "tabs.yaml", "unknown_workload_key.yaml"])
def test_a_real_process_prints_no_traceback(name: str) -> None:
    path = CORPUS.relative_to(REPO) / name
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "run", str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout == ""
    assert_refused(done.returncode, done.stderr, done.stderr, path, *CASES[name])


HEAVY = ("vllm", "torch", "tuner.run.run", "tuner.sweep.run", "tuner.capacity", "tuner.calibrate.run")
"""What a refusal must not wait for: vLLM and torch (10-20 s to import here), and the commands' wings."""
PROBE = (
    "import atexit, sys\n"
    "heavy = sys.argv.pop().split(',')\n"
    "atexit.register(lambda: print('LOADED', [m for m in heavy if m in sys.modules], file=sys.stderr))\n"
    "from tuner.cli.main import main\n"
    "sys.argv = ['tuner', *sys.argv[1:]]\n"
    "main()\n"
)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{missing}"],
        ["sweep", "{missing}"],
        ["capacity", "{malformed}"],
        ["calibrate", "{unknown_key}"],
        ["worker", "{missing}", "--storage", "sqlite:///x.db"],
        ["run", str(REPO / "experiments" / "quickstart.yaml"), "--output", "{tmp}"],
    ],
    ids=["run-missing", "sweep-missing", "capacity-malformed", "calibrate-unknown-key", "worker-missing", "run-output"],
)
def test_a_refusal_waits_for_neither_vllm_nor_a_commands_wing(tmp_path: Path, args: list[str]) -> None:
    """A missing or malformed experiment file, or a bad ``--output``, is refused with exit 2 and one line before
    vLLM, torch or the command's own modules are imported (so in about the interpreter's start-up time: 1.4 s here,
    where importing vLLM takes 10-20 s)."""
    (tmp_path / "malformed.yaml").write_text("name: x\nengine: [\n")
    (tmp_path / "unknown_key.yaml").write_text("name: x\nbogus: 1\n")
    paths = {"missing": tmp_path / "missing.yaml", "malformed": tmp_path / "malformed.yaml"}
    paths |= {"unknown_key": tmp_path / "unknown_key.yaml", "tmp": tmp_path}
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv, ",".join(HEAVY)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == "LOADED []", done.stderr
    assert len(lines) == 2 and lines[0].startswith("error: "), done.stderr
