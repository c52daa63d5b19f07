"""``tuner capacity``: the load knob, the configuration it compares, the sentence it ends with, the report and plot
from a record (a known slowdown on the shared streaming engine: ``tests/engine/test_capacity_engine.py``)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tests import support
from tuner.capacity import configuration_from
from tuner.capacity.load import at_load, current_load, offered_rps
from tuner.capacity.run import SERVED_CLOCK_LATE, arms_of, conclude
from tuner.capacity.search import typical_wall
from tuner.capacity.sentence import capacity_sentence
from tuner.capacity.slo import CapacitySlo
from tuner.cli.main import app
from tuner.config import Experiment, LoadKnob, StartConfig
from tuner.errors import UserError
from tuner.records.capacity import load_capacity
from tuner.report.capacity import write_capacity_report
from tuner.stats.proportion import arm_attainment, wilson

REPO = Path(__file__).parent.parent
TRACE = REPO / "experiments" / "traces" / "mooncake-sample.yaml"


def experiment(**changes: Any) -> Experiment:
    sections: dict[str, Any] = {"workload": {"num_prompts": 8, "rate": 4.0}, "measure": {"slo": {"ttft_ms": 500}}}
    return support.capacity_experiment(**{**sections, **changes})


def test_the_knob_is_the_one_the_workload_uses_or_the_one_asked_for() -> None:
    assert experiment().load_knob() is LoadKnob.RATE
    capped = experiment(workload={"num_prompts": 8, "rate": 4.0, "concurrency": 3})
    assert capped.load_knob() is LoadKnob.RATE  # a rate first: the cap then only limits it
    assert experiment(workload={"num_prompts": 8, "concurrency": 3}).load_knob() is LoadKnob.CONCURRENCY
    asked = experiment(workload={"num_prompts": 8, "rate": 4.0, "concurrency": 3}, capacity={"load": "concurrency"})
    assert asked.load_knob() is LoadKnob.CONCURRENCY
    with pytest.raises(ValueError, match="sends everything at once"):
        experiment(workload={"num_prompts": 8}).load_knob()


def test_a_load_changes_only_its_knob_and_the_requests_stay() -> None:
    base = experiment()
    faster = at_load(base, LoadKnob.RATE, 8.0)
    assert faster.workload.rate == 8.0 and current_load(faster, LoadKnob.RATE) == 8.0
    assert faster.workload.model_copy(update={"rate": 4.0}) == base.workload
    capped = experiment(workload={"num_prompts": 8, "concurrency": 3})
    assert at_load(capped, LoadKnob.CONCURRENCY, 4.6).workload.concurrency == 5  # whole requests in flight
    with pytest.raises(ValueError, match="positive and finite"):
        at_load(base, LoadKnob.RATE, 0.0)
    assert offered_rps([0.0, 0.5, 1.0]) == 2.0 and math.isinf(offered_rps([0.0, 0.0]))


def test_a_trace_is_replayed_faster_at_a_higher_speed() -> None:
    from tuner.config import load_experiment

    trace = load_experiment(TRACE)
    assert trace.load_knob() is LoadKnob.SPEED
    assert current_load(trace, LoadKnob.SPEED) == pytest.approx(2.5)  # time_scale 0.4
    assert at_load(trace, LoadKnob.SPEED, 5.0).workload.dataset.time_scale == pytest.approx(0.2)  # type: ignore[union-attr]


def test_the_configuration_comes_from_a_winner_file_or_the_experiment(tmp_path: Path) -> None:
    winner = tmp_path / "winner.yaml"
    winner.write_text(yaml.safe_dump({"engine": {}, "env": {}, "strategies": {"gc_threshold": {"gen0_per_seq": 64}}}))
    assert configuration_from(experiment(), winner).strategies == {"gc_threshold": {"gen0_per_seq": 64}}
    own = experiment(strategies={"known_delay": {"worker_ms": 1.0}})
    assert configuration_from(own, None).strategies == {"known_delay": {"worker_ms": 1.0}}
    for text, message in (
        ("strategies: [a]\n", "not a winner file"),
        ("trial: 3\nstrategies: {}\n", "not a winner file"),
        ("strategies: {a: 1\n", "not a YAML text file"),
    ):
        winner.write_text(text)
        with pytest.raises(UserError, match=message):
            configuration_from(experiment(), winner)
    with pytest.raises(UserError, match="cannot read"):
        configuration_from(experiment(), tmp_path)


def test_the_command_refuses_what_it_cannot_compare_before_an_engine_starts(tmp_path: Path) -> None:
    path = tmp_path / "cap.yaml"
    body = {"name": "cap", "workload": {"num_prompts": 8, "rate": 4.0}, "measure": {"slo": {"ttft_ms": 500}}}
    body["output_dir"] = str(tmp_path / "results")
    path.write_text(yaml.safe_dump(body))
    nothing = CliRunner().invoke(app, ["capacity", str(path)])
    assert nothing.exit_code == 2 and "no configuration to compare" in nothing.stderr
    path.write_text(yaml.safe_dump({**body, "capacity": {"engine": {"max_num_seqz": 32}, "env": {"VLLM_NOPE": "1"}}}))
    restart = CliRunner().invoke(app, ["capacity", str(path)])
    assert restart.exit_code == 2 and "capacity.engine.max_num_seqz: not a vLLM engine argument" in restart.stderr
    assert "capacity.env.VLLM_NOPE:" in restart.stderr
    path.write_text(yaml.safe_dump(body))
    winner = tmp_path / "winner.yaml"
    winner.write_text(yaml.safe_dump({"strategies": {"gc_magic": {}}}))
    unknown = CliRunner().invoke(app, ["capacity", str(path), "--against", str(winner)])
    assert unknown.exit_code == 2 and "strategies.gc_magic: unknown strategy" in unknown.stderr
    assert not (tmp_path / "results").exists()


def test_strategies_in_both_arms_are_the_reference_and_under_the_configuration(tmp_path: Path) -> None:
    both = {"shm_spin_window": {"window_s": 0.01}, "known_delay": {"worker_ms": 1.0}}
    exp = experiment(capacity={"in_both_arms": both})
    arms = arms_of(exp, StartConfig(strategies={"known_delay": {}}))
    assert arms == {"reference": both, "configuration": {**both, "known_delay": {}}}  # the configuration's on top
    assert arms_of(experiment(), StartConfig(strategies={"gc_freeze": {}})) == {
        "reference": {},
        "configuration": {"gc_freeze": {}},
    }
    path = tmp_path / "cap.yaml"
    body = {"name": "cap", "workload": {"num_prompts": 8, "rate": 4.0}, "measure": {"slo": {"ttft_ms": 500}}}
    body |= {"strategies": {"known_delay": {}}, "capacity": {"in_both_arms": {"spin_less": {}}}}
    path.write_text(yaml.safe_dump({**body, "output_dir": str(tmp_path / "results")}, sort_keys=False))
    refused = CliRunner().invoke(app, ["capacity", str(path)])
    assert refused.exit_code == 2 and "capacity.in_both_arms.spin_less: unknown strategy" in refused.stderr
    assert f"{path}:" in refused.stderr and not (tmp_path / "results").exists()


def test_the_command_prints_each_load_and_the_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tuner.capacity

    path = tmp_path / "cap.yaml"
    body = {"name": "cap", "workload": {"num_prompts": 8, "rate": 4.0}, "measure": {"slo": {"ttft_ms": 500}}}
    path.write_text(yaml.safe_dump({**body, "strategies": {"known_delay": {}}, "output_dir": str(tmp_path)}))
    written = tmp_path / "cap" / "capacity" / "capacity.json"
    monkeypatch.setattr(tuner.capacity, "run_capacity", lambda *args, **kwargs: (written, _record(tmp_path)))
    result = CliRunner().invoke(app, ["capacity", str(path)])
    assert result.exit_code == 0, result.output
    assert "78.33%" in result.output and "+5.00 [-1.00, +11.00]" in result.output  # the 8 requests/s row
    assert "the configuration serves 20.0% [5.0%, 40.0%] more requests/s" in result.output


def test_an_arms_interval_widens_when_its_rounds_disagree() -> None:
    steady = arm_attainment([0.9, 0.9, 0.9], 100)
    spread = arm_attainment([0.7, 1.0, 1.0], 100)
    z95 = 1.959963984540054
    assert steady.design_effect == 1.0 and (steady.ci_low, steady.ci_high) == pytest.approx(wilson(0.9, 300, z95))
    assert spread.attainment == pytest.approx(0.9) and spread.design_effect > 5
    assert spread.ci_high - spread.ci_low > 2 * (steady.ci_high - steady.ci_low)
    perfect = arm_attainment([1.0, 1.0], 50)
    assert perfect.ci_high == 1.0 and 0.95 < perfect.ci_low < 1.0  # none missed in 100: not a point


def _estimate(
    ratio: float, low: float | None, high: float | None, bounds: tuple[str, str] = ("exact", "exact")
) -> dict[str, Any]:
    flagged = (low is not None and low > 1) or (high is not None and high < 1)
    return {
        "capacity_a": {"load": 10.0, "bound": bounds[0], "ci_low": 9.0, "ci_high": 11.0},
        "capacity_b": {"load": 10.0 * ratio, "bound": bounds[1], "ci_low": 9.0 * ratio, "ci_high": 11.0 * ratio},
        "ratio": ratio,
        "ratio_bound": "exact" if bounds == ("exact", "exact") else "unknown",
        "ci_low": low,
        "ci_high": high,
        "flagged": flagged,
        "passes": 6,
        "method": "test",
    }


def test_one_stalled_run_does_not_make_a_load_look_dearer() -> None:
    """A level's runs took 0.45 s but one stalled for 1.82 s: a run there is forecast at the typical 0.45 s, not
    4x that (the longest run's figure stopped searches on budget they had not spent)."""
    runs = {"reference": [{"wall_s": 0.45}, {"wall_s": 0.46}], "configuration": [{"wall_s": 1.82}, {"wall_s": 0.44}]}
    assert typical_wall(runs) == pytest.approx(0.455)


def test_the_sentence_says_what_the_interval_shows() -> None:
    experiment = Experiment.model_validate({"name": "x", "measure": {"slo": {"ttft_ms": 500.0, "tpot_ms": 50.0}}})
    slo = CapacitySlo.of(experiment).words("slo")
    assert slo == "99% of requests within TTFT <= 500 ms and TPOT <= 50 ms"
    more = capacity_sentence(_estimate(1.061, 1.023, 1.098), LoadKnob.RATE, slo)
    assert more.startswith("the configuration serves 6.1% [2.3%, 9.8%] more requests/s than the reference at 99%")
    less = capacity_sentence(_estimate(0.486, None, 0.6), LoadKnob.SPEED, slo)
    assert less.startswith("the configuration serves 51.4% (95% CI: at least 40.0%) less traffic (replay speed)")
    unclear = capacity_sentence(_estimate(1.02, 0.97, None), LoadKnob.RATE, slo)
    assert "is not shown to serve a different load than the reference" in unclear
    assert "+2.0% (95% CI: at least -3.0%)" in unclear
    censored = capacity_sentence(_estimate(1.0, None, None, ("at_least", "exact")), LoadKnob.SPEED, slo)
    assert censored.startswith("capacity not bracketed") and "the reference meets it at every load probed" in censored
    assert capacity_sentence(None, LoadKnob.RATE, slo).startswith("no capacity estimate")


def _record(tmp_path: Path) -> dict[str, Any]:
    def level(load: float, a: list[float], b: list[float]) -> dict[str, Any]:
        attainment = {"reference": sum(a) / len(a), "configuration": sum(b) / len(b)}
        difference = {"difference": 0.05, "ci_low": -0.01, "ci_high": 0.11, "p_value": 0.09}
        return {
            "load": load,
            "offered_rps": load,
            "rounds": len(a),
            "requests": 20,
            "attainment": attainment,
            "difference": difference,
            "checks": [attainment],
            "tiers": {
                "slo": {
                    "attainment": attainment,
                    "rounds": {"reference": a, "configuration": b},
                    "difference": difference,
                }
            },
            "runs": {
                "reference": [{"attainment": x, "wall_s": 2.0, "other_cpus": 0.0} for x in a],
                "configuration": [{"attainment": x, "wall_s": 2.0, "other_cpus": 0.0} for x in b],
            },
            "set_aside": {"reference": [], "configuration": []},
        }

    return {
        "schema": "tuner.capacity/1",
        "experiment": "cap",
        "created": "2026-11-27T00:00:00+00:00",
        "mode": "engine",
        "vllm": "0.32.0",
        "slo": {"ttft_ms": 500.0, "tpot_ms": None, "e2e_ms": None},
        "target": 0.9,
        "reference": {"strategies": {}, "engine": {}, "env": {}},
        "configuration": {"strategies": {"known_delay": {"worker_ms": 4.0}}, "engine": {}, "env": {}},
        "against": None,
        "search": {
            "knob": "rate",
            "unit": "requests/s",
            "start": 4.0,
            "growth": 2.0,
            "resolution": 1.1,
            "rounds": 3,
            "precision": 0.05,
            "budget_s": 60.0,
            "spent_s": 58.0,
            "stop": "budget",
            "forecast": ["capacity budget 60 s: ..."],
            "contention": {"cpus": 0.25},
            "unloadable_from": None,
            "oversaturated": {"loads": 0, "rounds": 0, "saved_s": 0.0},
            "restarts": None,
            "unpaired": None,
        },
        "levels": [level(4.0, [1.0, 1.0, 0.95], [1.0, 1.0, 1.0]), level(8.0, [0.8, 0.85, 0.7], [0.95, 0.9, 0.9])],
        "estimate": (estimate := _estimate(1.2, 1.05, 1.4)),
        "checks": [{"metric": "slo", "limit_ms": None, "words": "TTFT <= 500 ms"}],
        "tiers": [
            {
                "name": "slo",
                "words": "90% of requests within TTFT <= 500 ms",
                "shares": [{"check": 0, "least": 0.9}],
                "estimate": estimate,
            }
        ],
        "summary": "the configuration serves 20.0% [5.0%, 40.0%] more requests/s",
        "workload": {},
        "host": None,
        "contention": None,
    }


@pytest.mark.parametrize(
    ("mode", "busy", "wait"),
    [("engine", 0.5, None), ("engine", 0.99, None), ("serve", 0.5, None), ("serve", 0.99, None),
     ("serve", 0.99, 0.02), ("serve", 0.99, 0.3), ("engine", 0.6, 0.3)],
)  # fmt: skip
def test_the_closing_sentence_says_when_the_tools_clock_waited_for_a_cpu_and_what_that_did_to_served_searches(
    tmp_path: Path, mode: str, busy: float, wait: float | None
) -> None:
    """Where the tool's wait for a CPU was sampled it decides (a saturated host whose client did not wait is no
    harm: vLLM's processes spin while they wait); where not, saturation does."""
    record: Any = {**_record(tmp_path), "mode": mode}
    for level in record["levels"]:
        for runs in level["runs"].values():
            for run in runs:
                run.update(host_busy=busy, tree_cpus=1.9, position=0.0, **({} if wait is None else {"tool_wait": wait}))
    conclude(record, LoadKnob.RATE)
    saturated, late = busy >= 0.95, (wait or 0.0) >= 0.1
    flagged = late if wait is not None else saturated
    assert record["host"]["saturated"] == {"reference": 6 * saturated, "configuration": 6 * saturated}
    assert record["host"]["waited"] == (None if wait is None else {"reference": 6 * late, "configuration": 6 * late})
    assert record["summary"].startswith("the configuration serves ")
    assert ("in 12 of 12 runs" in record["summary"]) is flagged
    assert ("clock waited for a CPU" in record["summary"]) is (flagged and wait is not None)
    assert (SERVED_CLOCK_LATE in record["summary"]) is (flagged and mode == "serve")
    assert record["contention"]["rerun"] == 0 and "run again" not in record["summary"]


def test_the_closing_sentence_says_how_many_rounds_were_run_again_after_other_work_took_the_host(
    tmp_path: Path,
) -> None:
    record: Any = _record(tmp_path)
    taken = {"attainment": 0.4, "wall_s": 3.1, "other_cpus": 1.1}
    record["levels"][1]["set_aside"] = {"reference": [{**taken, "other_cpus": 0.0}], "configuration": [taken]}
    conclude(record, LoadKnob.RATE)
    assert record["contention"]["rerun"] == 1 and record["contention"]["contended"]["configuration"] == 1
    assert record["summary"].startswith("the configuration serves ")
    assert "1 of 7 rounds were run again because other processes" in record["summary"]
    assert record["levels"][1]["attainment"]["configuration"] == pytest.approx(0.9167, abs=1e-4)  # as measured


def test_the_report_tells_the_levels_and_draws_the_attainment_with_the_knees(tmp_path: Path) -> None:
    record = _record(tmp_path)
    paths = write_capacity_report(tmp_path, record)  # type: ignore[arg-type]
    assert [p.name for p in paths] == ["report.md", "report.html", "attainment.png"]
    text = (tmp_path / "report.md").read_text()
    assert "**the configuration serves 20.0% [5.0%, 40.0%] more requests/s.**" in text
    assert "| 8 | 8 | 3 | 20 | 78.33% | 91.67% | +5.00 [-1.00, +11.00] | 0.09 | 10 / 7.83 | 10 / 9.17 |" in text
    assert (tmp_path / "attainment.png").stat().st_size > 10_000
    assert "- configuration: `known_delay` {'worker_ms': 4.0}\n" in text
    assert "- reference: vLLM 0.32.0 as installed, on the same engine (engine mode)" in text
    both = {"shm_spin_window": {"window_s": 0.01}}
    record["reference"]["strategies"] = both
    record["configuration"]["strategies"] = {**both, "known_delay": {"worker_ms": 4.0}}
    write_capacity_report(tmp_path, record)  # type: ignore[arg-type]
    text = (tmp_path / "report.md").read_text()
    assert "- configuration: `known_delay` {'worker_ms': 4.0}\n" in text  # its own, not the arms' common setting
    assert "as installed, with `shm_spin_window` {'window_s': 0.01} in both arms, on the same engine" in text
    record["configuration"]["engine"] = {"max_num_seqs": 32}
    record["search"]["restarts"] = [
        {"arm": arm, "tag": 0, "start_s": 15.0, "stop_s": 2.0} for arm in ("reference", "configuration")
    ]
    write_capacity_report(tmp_path, record)  # type: ignore[arg-type]
    text = (tmp_path / "report.md").read_text()
    assert "- configuration: `known_delay` {'worker_ms': 4.0}, `max_num_seqs`: 32\n" in text
    assert "in both arms, by restart pairs, an engine per arm and pass (engine mode)" in text
    assert "stopped: budget; 2 engine starts and stops took 34 s of it (17 s each)" in text


def test_report_and_export_read_a_capacity_directory(tmp_path: Path) -> None:
    directory = tmp_path / "cap" / "capacity"
    directory.mkdir(parents=True)
    (directory / "capacity.json").write_text(json.dumps(_record(tmp_path)))
    report = CliRunner().invoke(app, ["report", str(directory)])
    assert report.exit_code == 0, report.output
    assert (directory / "report.html").is_file() and (directory / "attainment.png").is_file()
    out = tmp_path / "bench.json"
    exported = CliRunner().invoke(app, ["export", "bench", str(tmp_path / "cap"), "-o", str(out), "--kind", "bigger"])
    assert exported.exit_code == 0, exported.output
    (entry,) = json.loads(out.read_text())
    assert entry["name"] == "cap/capacity-ratio/known_delay(worker_ms=4.0)/rate" and entry["unit"] == "x reference"
    assert (entry["value"], entry["range"]) == (1.2, "1.050-1.400x (95% CI)")
    record = _record(tmp_path)
    record["estimate"] = record["tiers"][0]["estimate"] = _estimate(1.0, None, None, ("at_least", "exact"))  # a bound
    # is no point on a chart
    (directory / "capacity.json").write_text(json.dumps(record))
    nothing = CliRunner().invoke(app, ["export", "bench", str(directory), "-o", str(out), "--kind", "bigger"])
    assert nothing.exit_code == 2 and "nothing to export in the capacity series" in nothing.stderr


def test_the_per_load_table_exports_as_csv_with_achieved_load_goodput_and_intervals(tmp_path: Path) -> None:
    """Per load and arm: at load 8 the reference ran 3 rounds of 20 requests in 2 s each, 78.3% of them within the
    SLO: achieved 60 / 6 = 10 req/s, goodput 47 / 6 = 7.83 req/s; the paired difference rides on both arms' rows. A
    path holding no capacity search is refused in one line, exit 2."""
    directory = tmp_path / "cap" / "capacity"
    directory.mkdir(parents=True)
    (directory / "capacity.json").write_text(json.dumps(_record(tmp_path)))
    out = tmp_path / "loads.csv"
    exported = CliRunner().invoke(app, ["export", "loads", str(tmp_path / "cap"), "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [(r["load"], r["tier"], r["arm"]) for r in rows] == [
        ("4", "slo", "reference"), ("4", "slo", "configuration"),
        ("8", "slo", "reference"), ("8", "slo", "configuration"),
    ]  # fmt: skip
    eight = rows[2]
    assert float(eight["achieved_rps"]) == pytest.approx(10.0) and float(eight["goodput_rps"]) == pytest.approx(47 / 6)
    assert float(eight["attainment_ci_low"]) < float(eight["attainment"]) == pytest.approx(0.7833, abs=1e-4)
    assert float(eight["attainment_ci_high"]) > 0.7833 and rows[3]["difference_ci_low"] == "-0.01"
    refused = CliRunner().invoke(app, ["export", "loads", str(tmp_path), "-o", str(out)])
    assert refused.exit_code == 2 and "no capacity search here" in refused.stderr and "Traceback" not in refused.output


def test_the_record_round_trips_and_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(_record(tmp_path)))
    assert load_capacity(path)["search"]["stop"] == "budget"
    path.write_text(json.dumps({"schema": "tuner.run/1"}))
    with pytest.raises(UserError, match=r"is not 'tuner\.capacity/1'"):
        load_capacity(path)
