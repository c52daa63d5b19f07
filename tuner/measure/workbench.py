"""One measured repetition on a live engine, and the proof that the requested strategies are active."""

from __future__ import annotations

from typing import Any, TypedDict

from strategies import Role, strategy_classes
from tuner.config import Experiment, Serve
from tuner.engine import EndpointSession, EngineSession, OfflineSession, ServerSession, StreamingSession
from tuner.errors import EnvNotInForce, StrategyNotActive
from tuner.feedback import SILENT, Feedback, task
from tuner.measure.workload import PreparedTraffic, build_requests, prepare
from tuner.metrics import Attribution, RequestLatency, RunMetrics, attribute, latencies, met_each, summarize
from tuner.plugin.protocol import PLUGIN_ERROR, REPORT, RESET, ProcessReport, switch_request
from tuner.traffic import RequestSpec, WorkloadRecord
from tuner.vllm import env_text, resolve_engine_args


def inactive_strategies(reports: list[ProcessReport], requested: dict[str, dict[str, Any]]) -> list[str]:
    """Why each requested strategy is not active where it belongs (empty when all are), and any process whose
    plugin failed (vLLM then runs without it, so nothing it reports can be trusted)."""
    problems = [
        f"the tuner plugin failed in {r['process_name']} (pid {r['pid']}): {r['errors'][PLUGIN_ERROR]}"
        for r in reports
        if PLUGIN_ERROR in r.get("errors", {})
    ]
    classes = strategy_classes()
    for name in requested:
        for role in sorted(classes[name].roles, key=lambda r: r.value):
            holders = [r for r in reports if role.value in r["roles"]]
            if not holders and role is Role.FRONTEND:
                continue  # e.g. an endpoint started elsewhere: no front-end of ours to check
            if not holders:
                problems.append(f"{name}: no {role.value} process reported")
            for report in holders:
                if name not in report["active"]:
                    why = report["errors"].get(name, "not applied")
                    problems.append(f"{name}: not active in {report['process_name']} (pid {report['pid']}): {why}")
    return problems


def idle_strategies(reports: list[ProcessReport], requested: dict[str, dict[str, Any]]) -> list[str]:
    """Requested strategies whose counters did not move in a process where they are active: reported active, but
    their patched path never ran (or their state was not verified) during the repetition just measured."""
    return [
        f"{name}: active in {r['process_name']} (pid {r['pid']}) but its counters did not move during the "
        "repetition: its patched code path never ran there"
        for name in requested
        for r in reports
        if name in r["active"] and not any(v > 0 for v in r["counters"].get(name, {}).values())
    ]


def check_ran(reports: list[ProcessReport], names: set[str]) -> None:
    """Raise :class:`StrategyNotActive` unless each strategy's counters moved in every engine process of one of its
    roles since the last ``reset``: the proof for a step-level comparison, where each process switches per batch
    (the front-end does not take part)."""
    classes = strategy_classes()
    problems = [
        f"{name}: its counters did not move in {r['process_name']} (pid {r['pid']}) during the step-level "
        f"comparison{': ' + r['errors'][name] if name in r['errors'] else ''}"
        for name in sorted(names)
        for r in reports
        if {role.value for role in classes[name].roles - {Role.FRONTEND}} & set(r["roles"])
        and not any(v > 0 for v in r["counters"].get(name, {}).values())
    ]
    if problems:
        raise StrategyNotActive("requested strategies did not run:\n  " + "\n  ".join(problems))


def check_active(reports: list[ProcessReport], requested: dict[str, dict[str, Any]], *, moved: bool = False) -> None:
    """Raise :class:`StrategyNotActive` unless every requested strategy is active where it belongs (and, after a
    measured repetition, ``moved``: proved active by its counters)."""
    problems = inactive_strategies(reports, requested) + (idle_strategies(reports, requested) if moved else [])
    if problems:
        raise StrategyNotActive("requested strategies are not active:\n  " + "\n  ".join(problems))


def check_env_in_force(reports: list[ProcessReport], env: dict[str, str]) -> None:
    """Raise :class:`EnvNotInForce` unless every process of the engine runs with ``env`` (vLLM's variables the
    experiment or trial sets): the proof that a restart dimension reached EngineCore and each worker."""
    wrong = [
        f"{name}={value} is {r.get('vllm_env', {}).get(name, 'unset')} in {r['process_name']} (pid {r['pid']})"
        for r in reports
        for name, value in env.items()
        if r.get("vllm_env", {}).get(name) != value
    ]
    if wrong:
        raise EnvNotInForce("vLLM's environment variables did not reach the engine: " + "; ".join(wrong))


def open_session(
    engine_args: dict[str, Any],
    plugin_spec: str,
    *,
    streaming: bool,
    serve: Serve | None = None,
    env: dict[str, Any] | None = None,
) -> EngineSession:
    """Start the right kind of engine: in this process for the workload's shape, or an HTTP server (``serve``),
    with vLLM's environment variables ``env`` in force while it runs (an endpoint started elsewhere has its own)."""
    args = resolve_engine_args(engine_args)
    variables = {name: env_text(value) for name, value in (env or {}).items()}
    if serve is not None and serve.endpoint:
        return EndpointSession(args, plugin_spec, serve)
    if serve is not None:
        return ServerSession(args, plugin_spec, serve, variables)
    return (StreamingSession if streaming else OfflineSession)(args, plugin_spec, variables)


class MeasuredRepetition(TypedDict):
    """One run of the workload (:meth:`Workbench.repetition`)."""

    metrics: RunMetrics
    processes: list[ProcessReport]  # one per vLLM process, without their raw step and pause intervals
    tail: Attribution | None  # the tail attribution (None without streamed tokens or a shared clock)
    token_ids: list[list[int]]  # each request's output token ids, in order
    met: list[bool]  # each request: completed within every measure.slo target
    latencies: list[RequestLatency | None]  # each request's, None where it did not complete


class Workbench:
    """A started engine plus the experiment's fixed requests: measure repetitions on it."""

    @classmethod
    def start(
        cls,
        experiment: Experiment,
        plugin_spec: str,
        engine_args: dict[str, Any] | None = None,
        env: dict[str, Any] | None = None,
    ) -> Workbench:
        """The one engine start for an experiment: its engine args and vLLM environment variables (or
        ``engine_args``, ``env``), its workload's mode, the plugin with ``plugin_spec``; warmed up, so that the
        first measured repetition is not a cold one."""
        session = open_session(
            experiment.engine if engine_args is None else engine_args,
            plugin_spec,
            streaming=experiment.workload.streaming,
            serve=experiment.serving,
            env=experiment.env if env is None else env,
        )
        try:
            if session.env:
                check_env_in_force(session.control(REPORT), session.env)
            bench = cls(session, experiment)
            bench.warm_up()
        except BaseException:
            session.close()
            raise
        return bench

    def __init__(self, session: EngineSession, experiment: Experiment, prepared: PreparedTraffic | None = None) -> None:
        """The engine of ``session`` with ``experiment``'s requests at its send times; ``prepared``: those requests
        read and built already (sent at the experiment's timing), not read again."""
        self.session = session
        self.experiment = experiment
        self.strategies: dict[str, dict[str, Any]] = {}  # the set in force, as last switched to
        planned = (prepared or prepare(experiment, session.vocab_size())).at(experiment)
        self.requests: list[RequestSpec] = planned.requests
        self.offsets: list[float] = planned.offsets
        self.workload: WorkloadRecord = planned.record
        self._said_no_reset = False

    def warm_up(self) -> None:
        """One untimed batch: the dataset's first requests, or synthetic ones of another seed."""
        count = self.experiment.measure.warmup_prompts
        workload = self.experiment.workload
        if count:
            if workload.dataset is not None:
                warm = self.requests[:count]
            else:
                warm = build_requests(workload, self.session.vocab_size(), count=count, seed_offset=7)
            self.session.run(warm, [0.0] * len(warm), workload.sampling)

    def switch(self, strategies: dict[str, dict[str, Any]]) -> list[ProcessReport]:
        reports = self.session.control(switch_request(strategies))
        check_active(reports, strategies)
        self.strategies = strategies
        return reports

    def fresh_prefix_cache(self, feedback: Feedback = SILENT) -> None:
        """Empty vLLM's prefix cache before a replay: otherwise every replay after the first finds its prompts
        cached by the one before, and prefix caching stops behaving as the traffic makes it. Said once where the
        engine does not allow it (a server started elsewhere)."""
        if not self.session.reset_prefix_cache() and not self._said_no_reset:
            self._said_no_reset = True
            feedback.note(
                "vLLM's prefix cache cannot be reset here: each replay after the first finds prompts cached by the "
                "ones before",
                "warning",
            )

    def repetition(self, feedback: Feedback = SILENT, label: str = "requests") -> MeasuredRepetition:
        """Run the workload once; return its metrics, per-process telemetry, output token ids and whether each
        request met every ``measure.slo`` target."""
        workload = self.experiment.workload
        self.fresh_prefix_cache(feedback)
        self.session.control(RESET)
        with task(feedback, label, len(self.requests)) as requests:
            timings, wall = self.session.run(
                self.requests, self.offsets, workload.sampling, workload.concurrency, requests.update
            )
        processes = self.session.control(REPORT)
        check_active(processes, self.strategies, moved=True)  # no number from a strategy that did not run
        slo = self.experiment.measure.slo
        metrics = summarize(timings, wall, slo)
        tail = attribute(timings, processes, slo.tpot_ms if slo is not None else None)
        for process in processes:  # the raw intervals are joined here, not kept: run.json stays small
            process["gc"].pop("pauses", None)
            process.pop("steps", None)
        if processes:  # none from an endpoint the tuner did not start
            # Process-level figures a sweep can constrain (e.g. `peak_rss_mb: {max: ...}` against runaway memory).
            metrics["peak_rss_mb"] = max(p["gc"]["peak_rss_bytes"] for p in processes) / 2**20
            metrics["gc_share_max"] = max(p["gc"]["gc_share"] for p in processes)
            metrics["gc_max_pause_ms"] = max(p["gc"]["max_pause_ms"] for p in processes)
            metrics["gc_critical_share_max"] = max(p["gc"]["gc_critical_share"] for p in processes)
            metrics["gc_critical_max_pause_ms"] = max(p["gc"]["critical_max_pause_ms"] for p in processes)
        return {
            "metrics": metrics,
            "processes": processes,
            "tail": tail,
            "token_ids": [t.token_ids for t in timings],
            "met": met_each(timings, slo),
            "latencies": latencies(timings),
        }
