"""Fuzzing the experiment loader: whatever the file holds, it loads or is refused with a UserError.

Never any other exception, never a problem without a message, never a problem rendered on more than one line.
"""

from __future__ import annotations

import copy
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.config import Experiment, load_experiment
from tuner.errors import UserError

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID: dict[str, Any] = {
    "name": "fuzz",
    "engine": {"model": "builtin:opt-tiny", "max_num_seqs": 16, "max_model_len": 256},
    "workload": {
        "num_prompts": 8,
        "input_len": {"dist": "uniform", "low": 8, "high": 24},
        "output_len": {"dist": "normal", "mean": 32, "std": 4, "low": 1, "high": 64},
        "rate": 4.0,
        "sampling": {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "ignore_eos": True},
        "seed": 0,
    },
    "measure": {"repetitions": 2, "warmup_prompts": 2},
    "strategies": {"gc_threshold": {"gen0_per_seq": 8}, "gc_freeze": None},
    "search": {
        "space": {
            "gc_threshold": [False, True],
            "gc_threshold.gen0_per_seq": {"low": 0, "high": 64, "step": 8},
            "engine.max_num_seqs": [16, 32],
        },
        "objectives": [{"metric": "output_tokens_per_s", "direction": "maximize"}],
        "constraints": [{"metric": "itl_p99_ms", "max": 50}],
        "sampler": "tpe",
        "n_trials": 4,
        "pairs": {"min": 6, "max": 8},
    },
}

NUMBERS = (
    st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()
    | st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, math.inf, -math.inf, math.nan, 1e308, -0.0])
)
WORDS = st.sampled_from(
    [
        *("", "inf", "nan", "fixed", "uniform", "normal", "builtin:opt-tiny", "builtin:nope", "/nonexistent", "~x/y"),
        *("./", "gc_threshold", "gc_threshold.gen0_per_seq", "engine.max_num_seqs", "output_tokens_per_s", "[/x]"),
    ]
)
LEAVES = st.none() | st.booleans() | NUMBERS | st.text(max_size=20) | WORDS
KEYS = st.text(max_size=12) | WORDS | st.integers(-3, 3) | st.booleans()
TREES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12
)


def assert_loads_or_refuses(path: Path) -> None:
    try:
        experiment = load_experiment(path)
    except UserError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.message.strip()
            assert "\n" not in problem.render(str(path))
    else:
        assert isinstance(experiment, Experiment)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "fuzz.yaml"


def paths(tree: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path into ``tree`` (mappings and lists), the root included."""
    yield prefix
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, child in items:
        yield from paths(child, (*prefix, key))


def mutate(data: st.DataObject, doc: dict[str, Any]) -> dict[str, Any]:
    """Drop keys, swap values for random trees and insert unknown keys at random depths."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        path = data.draw(st.sampled_from(list(paths(doc))), label="path")
        parent: Any = None
        node: Any = doc
        for key in path:
            parent, node = node, node[key]
        op = data.draw(st.sampled_from(["drop", "replace", "insert"]), label="op")
        if op == "insert" and isinstance(node, dict):
            node[data.draw(KEYS, label="key")] = data.draw(TREES, label="value")
        elif op == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif parent is not None:
            parent[path[-1]] = data.draw(TREES, label="value")
    return doc


def test_the_valid_experiment_loads(scratch: Path) -> None:
    scratch.write_text(yaml.safe_dump(VALID))
    assert load_experiment(scratch).search is not None


@FUZZ
@given(data=st.data())
def test_mutated_experiments_load_or_are_refused(scratch: Path, data: st.DataObject) -> None:
    scratch.write_text(yaml.safe_dump(mutate(data, VALID), allow_unicode=True), encoding="utf-8")
    assert_loads_or_refuses(scratch)


@FUZZ
@given(tree=TREES)
def test_arbitrary_structures_load_or_are_refused(scratch: Path, tree: Any) -> None:
    scratch.write_text(yaml.safe_dump(tree, allow_unicode=True), encoding="utf-8")
    assert_loads_or_refuses(scratch)


YAML_TOKENS = st.sampled_from(
    [
        *("name: x\n", "engine:", "workload:", "search:", "space:", "strategies:", " ", "  ", "\n", "\t", "- ", ": "),
        *(
            "{",
            "}",
            "[",
            "]",
            ",",
            "'",
            '"',
            "#",
            "&a ",
            "*a",
            "<<: *a",
            "---\n",
            "...\n",
            "? ",
            "|",
            ">",
            "%YAML 1.1\n",
        ),
        *(
            "!!int ",
            "!!float ",
            "!!bool ",
            "!!timestamp ",
            "!!binary ",
            "!!set ",
            "!!omap ",
            "!!str ",
            "!!python/name:x",
        ),
        *("2001-02-30", "2001-12-14t21:59:43.10-05:00", ".nan", ".inf", "-.inf", "0x1F", "0o17", "1_000", "190:20:30"),
        *("1e400", "1.0e+400", "~", "null", "yes", "off", "abc", "\\x00", "\x00", "\x85", "\ufeff", "\u2028", "é"),
    ]
)


@FUZZ
@given(text=st.lists(YAML_TOKENS, max_size=30).map("".join))
def test_yaml_like_text_loads_or_is_refused(scratch: Path, text: str) -> None:
    scratch.write_text(text, encoding="utf-8")
    assert_loads_or_refuses(scratch)


@FUZZ
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_arbitrary_bytes_load_or_are_refused(scratch: Path, raw: bytes) -> None:
    scratch.write_bytes(raw)
    assert_loads_or_refuses(scratch)
