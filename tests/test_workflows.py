"""The GitHub workflows parse, have the intended shape, and only call `tuner` commands that exist."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
TUNER_CALL = re.compile(r"(?:^|[\s;&|(])(?:\S*/)?tuner\s+(?P<args>[^;&|\n]*)")


def load_workflow(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict), name
    return data


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on:` key as True
    assert isinstance(on, dict), "expected `on:` as a mapping"
    return on


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    jobs = workflow.get("jobs")
    assert isinstance(jobs, dict) and jobs, "no jobs"
    out = []
    for job in jobs.values():
        assert isinstance(job.get("steps"), list) and job["steps"], "a job without steps"
        out += job["steps"]
    return out


def tuner_calls(workflow: dict[str, Any]) -> list[list[str]]:
    """The argument lists of every `tuner ...` invocation in the workflow's run scripts."""
    calls = []
    for step in steps(workflow):
        for line in str(step.get("run", "")).splitlines():
            line = line.split(" #", 1)[0]
            calls += [shlex.split(m.group("args")) for m in TUNER_CALL.finditer(line)]
    return calls


def command_tree(group: Any) -> dict[str, Any]:
    """{name: subtree or None} of a click/typer group (typer may vendor its own click: duck-typed)."""
    return {
        name: command_tree(cmd) if isinstance(getattr(cmd, "commands", None), dict) else None
        for name, cmd in group.commands.items()
    }


def known_commands() -> dict[str, Any]:
    """Commands of the real CLI."""
    from tuner.cli.main import app

    return command_tree(typer.main.get_command(app))


@pytest.mark.parametrize("name", ["ci.yml", "perf.yml"])
def test_workflow_parses_with_jobs_and_steps(name: str) -> None:
    workflow = load_workflow(name)
    assert workflow.get("name")
    assert triggers(workflow)
    assert steps(workflow)
    for step in steps(workflow):
        assert "run" in step or "uses" in step, step


@pytest.mark.parametrize("name", ["ci.yml", "perf.yml"])
def test_every_tuner_command_in_the_workflows_exists(name: str) -> None:
    tree = known_commands()
    missing = []
    for args in tuner_calls(load_workflow(name)):
        words = [a for a in args if not a.startswith("-")]
        node: dict[str, Any] | None = tree
        path: list[str] = []
        for word in words:
            if node is None:
                break  # a leaf command: the rest are its arguments
            path.append(word)
            if word not in node:
                missing.append(f"`tuner {' '.join(path)}` (known here: {', '.join(sorted(node))})")
                break
            node = node[word]
        else:
            if isinstance(node, dict):
                missing.append(f"`tuner {' '.join(path)}` needs a subcommand: {', '.join(sorted(node))}")
    assert not missing, f"{name} runs commands the CLI does not have: " + "; ".join(missing)


def test_ci_runs_the_readme_test_command_on_both_pythons() -> None:
    workflow = load_workflow("ci.yml")
    on = triggers(workflow)
    assert "push" in on and "pull_request" in on and "schedule" in on
    job, slow = workflow["jobs"]["test"], workflow["jobs"]["slow"]
    assert "if" not in job and "schedule" in slow["if"]  # every push runs the suite; nightly the slow tests too
    assert any(str(s.get("run", "")).strip() == "bash .ci/run -m slow" for s in slow["steps"])
    assert job["runs-on"] == "ubuntu-latest"
    assert [str(v) for v in job["strategy"]["matrix"]["python-version"]] == ["3.11", "3.12"]
    assert any(str(s.get("run", "")).strip() == "bash .ci/run" for s in job["steps"])
    assert (ROOT / ".ci" / "run").is_file()


def test_perf_workflow_tracks_benchmarks_noise_aware() -> None:
    workflow = load_workflow("perf.yml")
    on = triggers(workflow)
    assert on["push"]["branches"] == ["main"] and "pull_request" in on and "workflow_dispatch" in on
    (job,) = workflow["jobs"].values()
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    all_steps = job["steps"]
    scripts = "\n".join(str(s.get("run", "")) for s in all_steps)
    assert "pip install -q -e '.[gpu]'" in scripts
    calls = [" ".join(c[:1]) for c in tuner_calls(workflow)]
    assert calls[:3] == ["calibrate", "sweep", "report"] and "export" in calls  # the sweep takes the grain

    upload = [s for s in all_steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and upload[0]["uses"].endswith("@v4") and upload[0]["with"]["path"] == "results/"

    bench = [s for s in all_steps if str(s.get("uses", "")).startswith("benchmark-action/github-action-benchmark@")]
    exported = set(re.findall(r"-o (\S+)", scripts))
    assert all(step["uses"].endswith("@v1") for step in bench)
    by_file = {step["with"]["output-file-path"]: step["with"] for step in bench}
    assert set(by_file) == {
        "bench/ratio-bigger.json",
        "bench/ratio-smaller.json",
        "bench/absolute-bigger.json",
        "bench/absolute-smaller.json",
    }
    assert len({options["name"] for options in by_file.values()}) == 4, "one stored suite per file"
    store = str(job["env"]["STORE"])
    assert "github.event_name == 'push'" in store and "refs/heads/main" in store
    for file, options in by_file.items():
        assert file in exported, "the action must read a file `tuner export bench` wrote"
        series, kind = file.removeprefix("bench/").removesuffix(".json").split("-")
        assert f"--series {series} --kind {kind} -o {file}" in scripts
        assert options["tool"] == {"bigger": "customBiggerIsBetter", "smaller": "customSmallerIsBetter"}[kind]
        # stores (and publishes) only on a push to main
        for key in ("auto-push", "save-data-file"):
            assert "STORE" in str(options[key]) or "refs/heads/main" in str(options[key])
        threshold = int(str(options["alert-threshold"]).rstrip("%"))
        if series == "ratio":  # paired ratios, CI about ±1-2% (±4% for latency): alert on a 5-10% move
            assert 103 <= threshold <= 110, "the ratio alert must sit above the CI noise and below 10%"
            assert options["comment-on-alert"] is True
            assert options["fail-on-alert"] is False, "PRs are gated by `tuner pr-check`, not the previous point"
        else:  # absolute figures drift ±12% with the host: context, never a gate
            assert options["comment-on-alert"] is False and options["fail-on-alert"] is False
            assert threshold >= 124
    assert by_file["bench/ratio-bigger.json"]["alert-threshold"] == "105%"


def test_perf_workflow_reports_change_points_in_the_job_summary() -> None:
    workflow = load_workflow("perf.yml")
    (job,) = workflow["jobs"].values()
    names = [s.get("name", "") for s in job["steps"]]
    (history,) = [s for s in job["steps"] if "tuner history" in str(s.get("run", ""))]
    script = str(history["run"])
    assert history["if"] == "${{ !cancelled() }}"
    assert "-e '.[history]'" in script, "Otava comes from the project's `history` extra"
    assert "git show FETCH_HEAD:perf/gpu/data.js" in script and '--summary "$GITHUB_STEP_SUMMARY"' in script
    (call,) = [c for c in tuner_calls(workflow) if c[0] == "history"]
    assert call[1] == "$data" and "-o" in call
    tracked = max(i for i, s in enumerate(job["steps"]) if "github-action-benchmark" in str(s.get("uses", "")))
    upload = next(i for i, s in enumerate(job["steps"]) if "upload-artifact" in str(s.get("uses", "")))
    assert tracked < names.index(history["name"]) < upload, "history after storing the point, plots uploaded"


def test_perf_workflow_checks_a_pr_against_its_base_series_and_comments() -> None:
    workflow = load_workflow("perf.yml")
    (job,) = workflow["jobs"].values()
    all_steps = job["steps"]
    assert workflow["permissions"]["pull-requests"] == "write"
    (check,) = [s for s in all_steps if "tuner pr-check" in str(s.get("run", ""))]
    assert check["if"] == "${{ github.event_name == 'pull_request' }}"
    assert check["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    script = str(check["run"])
    assert "git show FETCH_HEAD:perf/gpu/data.js > results/base-data.js" in script, "main's stored series"
    (call,) = [c for c in tuner_calls(workflow) if c[0] == "pr-check"]
    exported = set(re.findall(r"-o (\S+)", "\n".join(str(s.get("run", "")) for s in all_steps)))
    assert {"bench/ratio-bigger.json", "bench/ratio-smaller.json"} == {a for a in call if a.startswith("bench/")}
    assert {"bench/ratio-bigger.json", "bench/ratio-smaller.json"} <= exported
    options = dict(itertools.pairwise(call))
    assert options["--base"] == "results/base-data.js" and options["--base-commit"] == "$BASE_SHA"
    assert options["--series"] == "perf-gpu/ratio-to-baseline/*" and "--fail-on-regression" in call
    comment_file = options["--comment"]
    index = all_steps.index(check)
    post = all_steps[index + 1]
    assert post["uses"] == "actions/github-script@v7"
    assert "!cancelled()" in post["if"] and "pull_request" in post["if"], "posted also when the check failed"
    assert f"readFileSync('{comment_file}'" in post["with"]["script"]
    assert "updateComment" in post["with"]["script"], "one comment per PR, updated on each push"
    tracked = max(i for i, s in enumerate(all_steps) if "github-action-benchmark" in str(s.get("uses", "")))
    assert tracked < index, "the charts' steps run before the gate can fail the job"
