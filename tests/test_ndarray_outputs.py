"""ndarray_outputs on CPU, on objects shaped like the GPU path (vLLM itself is not imported).

Model Runner V2's output is vLLM's own ``AsyncOutput.get_output``, compiled from the GPU wheel's source of each
release of the support matrix onto a small class, fed host arrays made with torch. The scheduler is a reduction of
``Scheduler.update_from_output`` to what reads the rows: the read by index, ``_update_request_with_output`` with its
stop check and trim, ``Request.append_output_token_ids``, structured output's ``accept_tokens`` and the
msgspec-encoded ``EngineCoreOutput``.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import pickle
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import numpy as np
import pytest
import torch

from strategies import ProcessContext, Role
from strategies.ndarray_outputs import (
    _EMPTY_ROW,
    _V1_REWRITES,
    NdarrayOutputs,
    SampledRows,
    host_array,
    path_refusal,
    rewrite,
)
from tests.vllm_sources import MATRIX, gpu_vllm_source

STOP = 2  # the stop token of every request
# One step of six requests, rows padded to 1 + 3 draft tokens with -1 as the sampler pads them.
REQ_IDS = ("zero", "prefill", "stop", "drafts", "aborted", "large")
SAMPLED = [
    [0, -1, -1, -1],  # token 0: falsy as an int, and a one-element array holding it is falsy too
    [5, -1, -1, -1],  # a prefill chunk that is not the last: vLLM keeps none of its ids
    [STOP, -1, -1, -1],
    [11, 12, STOP, 13],  # accepted drafts; the stop token in the middle trims the rest
    [7, -1, -1, -1],  # aborted while the step ran: the scheduler no longer knows it
    [151_643, 9, -1, -1],
]
NUM_SAMPLED = [1, 0, 1, 4, 1, 2]
EXPECTED = [
    ("zero", [0], False),
    ("stop", [STOP], True),
    ("drafts", [11, 12, STOP], True),
    ("large", [151_643, 9], False),
]


# --- Model Runner V2's AsyncOutput, from each release's source ------------------------------------------------------

_STUBS = """\
from __future__ import annotations
from types import SimpleNamespace

envs = SimpleNamespace(VLLM_RAISE_ON_LOGIT_NANS=False)


def raise_if_nan_logits(num_nans_in_logits):
    raise AssertionError("no NaN counts in these steps")


def get_ep_all2all_manager():
    raise AssertionError("no expert parallelism in these steps")


class AsyncOutput:
"""


def _method_source(path: Path, cls: str, method: str) -> str:
    source = path.read_text()
    owner = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name == method)
    segment = ast.get_source_segment(source, node, padded=True)
    assert segment is not None
    return segment


def release_async_output(release: str, tmp_path: Path) -> Any:
    """A class whose ``get_output`` is vLLM ``release``'s ``AsyncOutput.get_output``, compiled from a file (so that
    the strategy reads its source as it reads vLLM's)."""
    method = _method_source(gpu_vllm_source(release) / "v1/worker/gpu/async_utils.py", "AsyncOutput", "get_output")
    path = tmp_path / f"async_utils_{release.replace('.', '_')}.py"
    path.write_text(_STUBS + method + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AsyncOutput


class CopyEvent:
    """The output copy stream's event: the device-to-host copy lands when it is waited on."""

    def __init__(self, device: torch.Tensor, host: np.ndarray) -> None:
        self.device, self.host = device, host

    def synchronize(self) -> None:
        np.copyto(self.host, self.device.numpy())


def async_output(cls: Any) -> Any:
    """An ``AsyncOutput`` of :data:`SAMPLED` as V2's ``sample_tokens`` leaves it: host arrays not yet copied."""
    output: Any = object.__new__(cls)
    device_ids = torch.tensor(SAMPLED, dtype=torch.int64)
    output.sampled_token_ids = torch.full_like(device_ids, -99).numpy()  # garbage until the copy event completes
    output.num_sampled_tokens_np = torch.tensor(NUM_SAMPLED, dtype=torch.int32).numpy()
    output.copy_event = CopyEvent(device_ids, output.sampled_token_ids)
    output.model_runner_output = SimpleNamespace(
        req_ids=list(REQ_IDS), req_id_to_index={r: i for i, r in enumerate(REQ_IDS)}, sampled_token_ids=None
    )
    for empty in (
        "num_nans",
        "logprobs_tensors",
        "sampling_mask_tensors",
        "pending_aux_output",
        "_has_fault",
        "routed_experts_cpu",  # 0.28-0.30
    ):
        setattr(output, empty, None)
    output.prompt_logprobs_dict, output.prompt_token_id_logprobs_dict = {}, {}
    return output


# --- The scheduler, reduced to what reads the rows --------------------------------------------------------------------


class EngineCoreOutput(msgspec.Struct, array_like=True):
    """vLLM's ``EngineCoreOutput`` as the front-end decodes it (``new_token_ids: list[int]``)."""

    request_id: str
    new_token_ids: list[int]
    finished: bool = False


class Request:
    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = [1, 3]  # the prompt

    def append_output_token_ids(self, token_ids: int | list[int]) -> None:  # vLLM's, as written
        if isinstance(token_ids, int):
            self._output_token_ids.append(token_ids)
            self._all_token_ids.append(token_ids)
        else:
            self._output_token_ids.extend(token_ids)
            self._all_token_ids.extend(token_ids)


class Scheduler:
    """``Scheduler.update_from_output``'s path of a request's row, as in vLLM 0.33 (0.26 and 0.32 read it alike)."""

    def __init__(self) -> None:
        self.requests = {r: Request(r) for r in REQ_IDS if r != "aborted"}
        self.accepted: list[list[int]] = []
        self.received: list[Any] = []

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> bytes:
        sampled_token_ids = model_runner_output.sampled_token_ids
        self.received.append(sampled_token_ids)
        outputs = []
        for req_id in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(req_id)
            if request is None:
                continue
            req_index = model_runner_output.req_id_to_index[req_id]
            generated_token_ids = sampled_token_ids[req_index] if sampled_token_ids else []
            stopped = False
            new_token_ids = generated_token_ids
            if new_token_ids:
                new_token_ids, stopped = self._update_request_with_output(request, new_token_ids)
            if new_token_ids and not self.accept_tokens(request, new_token_ids):
                stopped = True
            if new_token_ids or stopped:
                outputs.append(EngineCoreOutput(req_id, new_token_ids, stopped))
        return msgspec.msgpack.encode(outputs)  # to the front-end

    def _update_request_with_output(self, request: Request, new_token_ids: list[int]) -> tuple[list[int], bool]:
        stopped = False
        for num_new, output_token_id in enumerate(new_token_ids, 1):
            request.append_output_token_ids(output_token_id)
            stopped = output_token_id == STOP  # check_stop
            if stopped:
                del new_token_ids[num_new:]
                break
        return new_token_ids, stopped

    def accept_tokens(self, request: Request, token_ids: list[int]) -> bool:
        """Structured output's grammar takes Python ints."""
        assert type(token_ids) is list and all(type(t) is int for t in token_ids), token_ids
        self.accepted.append(list(token_ids))
        return True


SCHEDULER_OUTPUT = SimpleNamespace(num_scheduled_tokens=dict.fromkeys(REQ_IDS, 1))


def step(get_output: Callable[[Any], Any], update: Callable[..., bytes], cls: Any) -> dict[str, Any]:
    """One step from the runner's output to the front-end: what each part saw."""
    output = async_output(cls)
    model_runner_output = get_output(output)
    handed = model_runner_output.sampled_token_ids
    scheduler = Scheduler()
    encoded = update(scheduler, SCHEDULER_OUTPUT, model_runner_output)
    return {
        "async_output": output,
        "handed": handed,
        "received": scheduler.received[0],
        "outputs": [msgspec.structs.astuple(o) for o in msgspec.msgpack.decode(encoded, type=list[EngineCoreOutput])],
        "requests": {r: (q._output_token_ids, q._all_token_ids) for r, q in scheduler.requests.items()},
        "accepted": scheduler.accepted,
    }


def strategy_with(enabled: bool | None) -> NdarrayOutputs:
    strategy = NdarrayOutputs()
    strategy.enabled = enabled
    return strategy


def patched_step(strategy: NdarrayOutputs, cls: Any) -> dict[str, Any]:
    get_output = strategy.wrap_get_output(cls.get_output)
    return step(get_output, strategy.wrap_update_from_output(Scheduler.update_from_output), cls)


@pytest.fixture(params=MATRIX)
def v2_output(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return release_async_output(request.param, tmp_path)


def test_v2_rows_stay_numpy_from_the_runner_to_the_scheduler(v2_output: Any) -> None:
    seen = patched_step(strategy_with(True), v2_output)
    rows = seen["handed"]
    assert type(rows) is SampledRows and seen["received"] is rows
    assert rows.rows is seen["async_output"].sampled_token_ids  # the step's host array: no list, not even a copy
    assert rows.counts is seen["async_output"].num_sampled_tokens_np
    assert not gc.is_tracked(rows.rows) and not gc.is_tracked(rows.counts)


def test_v2_token_ids_reaching_requests_and_the_front_end_are_vllms(v2_output: Any) -> None:
    native = step(v2_output.get_output, Scheduler.update_from_output, v2_output)
    rows = patched_step(strategy_with(True), v2_output)
    assert native["outputs"] == EXPECTED  # the guard is meaningful: token 0, a trim, drafts, an abort
    for seen in ("outputs", "requests", "accepted"):
        assert rows[seen] == native[seen], seen


def test_v2_disabled_leaves_vllms_lists_untouched_and_counts_them(v2_output: Any) -> None:
    native = step(v2_output.get_output, Scheduler.update_from_output, v2_output)
    strategy = strategy_with(False)
    seen = patched_step(strategy, v2_output)
    assert seen["handed"] == native["handed"]  # vLLM's lists (trimmed in place at a stop, as vLLM trims them)
    assert seen["received"] is seen["handed"] and all(type(row) is list for row in seen["handed"])
    assert seen["outputs"] == native["outputs"]
    assert strategy.counters == {"list_steps": 1, "lists_received": 1}


def test_counters_prove_each_setting_ran_and_nothing_counts_when_not_applied(v2_output: Any) -> None:
    enabled = strategy_with(True)
    patched_step(enabled, v2_output)
    patched_step(enabled, v2_output)
    assert enabled.counters == {"ndarray_steps": 2, "ndarray_rows": 2 * len(REQ_IDS), "rows_to_lists": 2}
    idle = strategy_with(None)  # installed, never applied (or reverted): vLLM's path, uncounted
    assert patched_step(idle, v2_output)["outputs"] == EXPECTED
    assert idle.counters == {}


@pytest.mark.parametrize("sampled_enabled", [True, False])
def test_v2_each_batch_keeps_the_form_in_force_when_it_was_sampled(v2_output: Any, sampled_enabled: bool) -> None:
    """Per step: V2 builds the rows in ``get_output`` a step after sampling, when the next batch (possibly of the
    other arm) has already switched the worker. Each ``AsyncOutput`` is marked at creation; the scheduler takes
    either form whatever its own arm is."""
    strategy = strategy_with(sampled_enabled)
    output = async_output(v2_output)
    strategy.wrap_async_output_init(lambda _: None)(output)  # created while its batch was sampled
    strategy.enabled = not sampled_enabled  # the other arm is in force by the time its output is read
    handed = strategy.wrap_get_output(v2_output.get_output)(output).sampled_token_ids
    assert (type(handed) is SampledRows) is sampled_enabled
    native = step(v2_output.get_output, Scheduler.update_from_output, v2_output)
    scheduler = Scheduler()
    encoded = strategy.wrap_update_from_output(Scheduler.update_from_output)(
        scheduler,
        SCHEDULER_OUTPUT,
        SimpleNamespace(**{**vars(output.model_runner_output), "sampled_token_ids": handed}),
    )
    outputs = [msgspec.structs.astuple(o) for o in msgspec.msgpack.decode(encoded, type=list[EngineCoreOutput])]
    assert outputs == native["outputs"]  # the same tokens reach the front-end in either form


def test_rows_cross_a_process_boundary_as_arrays() -> None:
    rows = SampledRows(np.array(SAMPLED, dtype=np.int64), np.array(NUM_SAMPLED, dtype=np.int32))
    received = pickle.loads(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))  # the mp executor's transport
    assert type(received) is SampledRows and isinstance(received.rows, np.ndarray)
    assert [received[i] for i in range(len(received))] == [[0], [], [STOP], [11, 12, STOP, 13], [7], [151_643, 9]]
    assert all(type(t) is int for i in range(len(received)) for t in received[i])
    assert not SampledRows(np.empty((0, 4), dtype=np.int64), np.empty(0, dtype=np.int32))  # falsy when empty


def test_a_changed_get_output_is_refused_not_patched() -> None:
    class AsyncOutput:
        model_runner_output: Any
        sampled_token_ids: Any

        def get_output(self) -> Any:
            self.model_runner_output.sampled_token_ids = self.sampled_token_ids.tolist()
            return self.model_runner_output

    with pytest.raises(ValueError, match=r"AsyncOutput.get_output changed: expected `sampled_token_ids: list"):
        NdarrayOutputs().wrap_get_output(AsyncOutput.get_output)


def test_a_method_using_super_is_refused() -> None:
    class Base:
        def get_output(self) -> None: ...

    class AsyncOutput(Base):
        def get_output(self) -> None:
            super().get_output()

    with pytest.raises(ValueError, match="__class__ from an enclosing scope"):
        NdarrayOutputs().wrap_get_output(AsyncOutput.get_output)


# --- The V1 runner ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", MATRIX)
def test_v1_rewrite_applies_to_every_release(release: str) -> None:
    path = gpu_vllm_source(release) / "v1/worker/gpu_model_runner.py"
    source = rewrite(textwrap.dedent(_method_source(path, "GPUModelRunner", "_bookkeeping_sync")), _V1_REWRITES)
    compile(source, f"<{release} rewrite>", "exec")
    assert "_tuner_rows(self, sampled_token_ids)" in source


def test_v1_rows_reach_the_scheduler_as_vllms_lists() -> None:
    lists = [[4], [], [0]]
    rows = [np.array([4]), _EMPTY_ROW, np.array([0])]  # what the rewritten _bookkeeping_sync hands out
    strategy = strategy_with(True)
    update = strategy.wrap_update_from_output(Scheduler.update_from_output)
    ids = SimpleNamespace(num_scheduled_tokens={"zero": 1, "prefill": 1, "stop": 1})
    index = {"zero": 0, "prefill": 1, "stop": 2}
    native_scheduler, scheduler = Scheduler(), Scheduler()
    native = native_scheduler.update_from_output(ids, SimpleNamespace(sampled_token_ids=lists, req_id_to_index=index))
    patched = update(scheduler, ids, SimpleNamespace(sampled_token_ids=rows, req_id_to_index=index))
    assert type(scheduler.received[0]) is SampledRows
    assert patched == native and scheduler.accepted == native_scheduler.accepted == [[4], [0]]
    assert strategy.counters == {"rows_to_lists": 1}


def test_v1_host_copy_on_cpu_reads_the_tensor_in_place() -> None:
    sampled = torch.tensor([[3], [0]], dtype=torch.int64)
    array = host_array(SimpleNamespace(), sampled)
    assert array.tolist() == [[3], [0]] and np.shares_memory(array, sampled.numpy())


class DeviceIds:
    """A device tensor of sampled ids: what the runner holds on a GPU (a pageable ``.to("cpu")`` is refused)."""

    device = SimpleNamespace(type="cuda")

    def __init__(self, values: torch.Tensor, calls: list[str]) -> None:
        self.values, self.shape, self.calls = values, values.shape, calls

    def to(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a pageable device-to-host copy synchronises the stream")


class PinnedBuffer:
    def __init__(self, tensor: torch.Tensor, calls: list[str]) -> None:
        self.tensor, self.calls = tensor, calls

    def __getitem__(self, rows: slice) -> PinnedBuffer:
        return PinnedBuffer(self.tensor[rows], self.calls)

    def copy_(self, source: DeviceIds, non_blocking: bool = False) -> None:
        self.calls.append(f"copy non_blocking={non_blocking}")
        self.tensor.copy_(source.values)

    def numpy(self) -> np.ndarray:
        return self.tensor.numpy()


class TransferEvent:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def record(self) -> None:
        self.calls.append("record")

    def synchronize(self) -> None:
        self.calls.append("synchronize")


def test_v1_host_copy_on_a_gpu_goes_through_the_pinned_buffer_and_event_like_vllms() -> None:
    calls: list[str] = []
    buffer = torch.full((8, 1), -1, dtype=torch.int64)
    runner = SimpleNamespace(
        sampled_token_ids_pinned_cpu=PinnedBuffer(buffer, calls), transfer_event=TransferEvent(calls)
    )
    array = host_array(runner, DeviceIds(torch.tensor([[3], [0], [9]]), calls))
    assert calls == ["copy non_blocking=True", "record", "synchronize"]  # GPUModelRunner._to_list's sequence
    assert array.tolist() == [[3], [0], [9]]
    assert not np.shares_memory(array, buffer.numpy())  # the next step reuses the buffer


# --- Refusals --------------------------------------------------------------------------------------------------------


def config(v2: bool | None, async_scheduling: bool, spec: bool = False, **extra: Any) -> SimpleNamespace:
    """A resolved ``VllmConfig`` reduced to what decides the path (``v2=None``: a vLLM without V2)."""
    cfg = SimpleNamespace(
        scheduler_config=SimpleNamespace(async_scheduling=async_scheduling),
        speculative_config=SimpleNamespace(method="ngram") if spec else None,
        parallel_config=SimpleNamespace(distributed_executor_backend=extra.pop("executor", "uni")),
        model_config=SimpleNamespace(runner_type=extra.pop("runner_type", "generate")),
        **extra,
    )
    if v2 is not None:
        cfg.use_v2_model_runner = v2
    return cfg


@pytest.mark.parametrize(
    ("cfg", "refused"),
    [
        (config(v2=True, async_scheduling=True, executor="uni"), None),  # the GPU default
        (config(v2=True, async_scheduling=False, executor="mp"), None),
        (config(v2=True, async_scheduling=True, spec=True, executor="ray"), None),
        (config(v2=False, async_scheduling=False, executor="mp"), None),  # the CPU default
        (config(v2=False, async_scheduling=True), "V1 model runner with async scheduling"),
        (config(v2=None, async_scheduling=True), "V1 model runner with async scheduling"),
        (config(v2=False, async_scheduling=False, spec=True), "V1 model runner with speculative decoding"),
        (config(v2=True, async_scheduling=True, runner_type="pooling"), "a pooling model samples no token ids"),
        (config(v2=True, async_scheduling=True, is_mm_encoder_only=True), "an encoder-only instance"),
    ],
    ids=["v2-async-uni", "v2-sync-mp", "v2-spec-ray", "v1-sync", "v1-async", "no-v2", "v1-spec", "pooling", "encoder"],
)
def test_refused_before_measuring_from_the_resolved_config(cfg: SimpleNamespace, refused: str | None) -> None:
    reason = NdarrayOutputs().refuses(cfg)
    assert reason == path_refusal(cfg)
    assert reason is None if refused is None else refused in (reason or "")


class V1Runner:
    use_async_scheduling = False

    def _bookkeeping_sync(self) -> None: ...


class V2Runner: ...


class VllmScheduler:
    def update_from_output(self) -> None: ...


@pytest.fixture
def vllm_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's runner and scheduler modules as a live worker or EngineCore has them imported."""
    for name, attribute, cls in (
        ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", V1Runner),
        ("vllm.v1.worker.gpu.model_runner", "GPUModelRunner", V2Runner),
        ("vllm.v1.core.sched.scheduler", "Scheduler", VllmScheduler),
    ):
        module = types.ModuleType(name)
        setattr(module, attribute, cls)
        monkeypatch.setitem(sys.modules, name, module)


class AsyncV1Runner(V1Runner):
    use_async_scheduling = True


class OverridingRunner(V1Runner):
    def _bookkeeping_sync(self) -> None: ...


class OverridingScheduler(VllmScheduler):
    def update_from_output(self) -> None: ...


@pytest.mark.parametrize(
    ("role", "owner", "cfg", "refused"),
    [
        (Role.WORKER, SimpleNamespace(model_runner=V2Runner()), config(v2=True, async_scheduling=True), None),
        (Role.WORKER, SimpleNamespace(model_runner=V1Runner()), None, None),
        (Role.ENGINE_CORE, SimpleNamespace(scheduler=VllmScheduler()), None, None),
        (Role.WORKER, SimpleNamespace(model_runner=AsyncV1Runner()), None, "V1 model runner with async scheduling"),
        (Role.WORKER, SimpleNamespace(model_runner=OverridingRunner()), None, "OverridingRunner overrides"),
        (Role.WORKER, SimpleNamespace(model_runner=object()), None, "neither vLLM's V1 nor V2 GPUModelRunner"),
        (Role.ENGINE_CORE, SimpleNamespace(scheduler=OverridingScheduler()), None, "overrides update_from_output"),
        (
            Role.WORKER,
            SimpleNamespace(model_runner=V1Runner()),
            config(v2=False, async_scheduling=False, spec=True),
            "speculative decoding",
        ),
    ],
    ids=["v2", "v1-sync", "scheduler", "v1-async", "override", "unknown-runner", "override-scheduler", "v1-spec"],
)
def test_refused_again_when_a_process_is_ready(
    vllm_classes: None, role: Role, owner: Any, cfg: Any, refused: str | None
) -> None:
    strategy = NdarrayOutputs()
    ctx = ProcessContext(role=role, vllm_config=cfg, owner=owner)
    if refused is None:
        strategy.apply(ctx, {"enabled": True})
        assert strategy.enabled is True
        strategy.revert(ctx)
        assert strategy.enabled is None
        return
    with pytest.raises(RuntimeError, match=refused):
        strategy.apply(ctx, {"enabled": True})
    assert strategy.enabled is None  # never reported active where the patched path does not run
