"""What the plugin's own hooks (:mod:`tuner.plugin`) need from vLLM's source, on every release it supports.

Unlike a strategy, the plugin cannot be refused on one release: these must hold on every version of the support
matrix (``tests/test_vllm_compat.py`` checks them on each unpacked wheel).
"""

from __future__ import annotations

from strategies.framework import (
    Absent,
    AssignedIn,
    Defined,
    OpenDataclass,
    Order,
    Params,
    Requirement,
    Snippet,
    wait_points,
)

_CORE = "v1/engine/core.py"
_WORKER_BASE = "v1/worker/worker_base.py"
_GPU_WORKER = "v1/worker/gpu_worker.py"
_SCHEDULER = "v1/core/sched/scheduler.py"
_MP = "v1/executor/multiproc_executor.py"

REQUIRES: tuple[Requirement, ...] = (
    # Delivery: the `vllm.general_plugins` entry points are loaded in process 0, EngineCore and every worker.
    Snippet("plugins/__init__.py", "DEFAULT_PLUGINS_GROUP", text='"vllm.general_plugins"'),
    Snippet("plugins/__init__.py", "load_general_plugins", text="load_plugins_by_group(group=DEFAULT_PLUGINS_GROUP)"),
    Snippet("engine/arg_utils.py", "EngineArgs.__post_init__", text="load_general_plugins()"),
    Snippet(_WORKER_BASE, "WorkerWrapperBase.init_worker", text="load_general_plugins()"),
    # Ready hooks (`_hook` wraps a method only where the class itself defines it).
    Defined(_CORE, "EngineCore.__init__"),
    Defined(_CORE, "EngineCoreProc.run_busy_loop"),
    Defined(_CORE, "DPEngineCoreProc.run_busy_loop"),
    Defined(_GPU_WORKER, "Worker.compile_or_warm_up_model"),
    Defined("v1/worker/cpu_worker.py", "CPUWorker.compile_or_warm_up_model"),
    Defined("v1/engine/llm_engine.py", "LLMEngine.__init__"),
    Defined("v1/engine/async_llm.py", "AsyncLLM.__init__"),
    # Step wrap: both step functions, bound to `step_fn` only after a spawned EngineCore loaded the plugin.
    Defined(_CORE, "EngineCore.step"),
    Defined(_CORE, "EngineCore.step_with_batch_queue"),
    Order(_CORE, "EngineCore.__init__", first="load_general_plugins()", then="self.step_fn ="),
    Defined(_SCHEDULER, "Scheduler.schedule"),
    Absent(
        "v1/core/sched/async_scheduler.py",
        "AsyncScheduler.schedule",
        because="the step wrap counts scheduled tokens in Scheduler.schedule",
    ),
    Defined("v1/core/sched/output.py", "SchedulerOutput.total_num_scheduled_tokens"),
    AssignedIn(_CORE, "EngineCore.__init__", attribute="scheduler"),
    AssignedIn(_SCHEDULER, "Scheduler.__init__", attribute="running"),
    # Async scheduling is read from `batch_queue`: set exactly when step_with_batch_queue runs, whose first step
    # of a block finishes the other arm's batch (the washout).
    AssignedIn(_CORE, "EngineCore.__init__", attribute="batch_queue"),
    Snippet(_CORE, "EngineCore.__init__", text="self.step if self.batch_queue is None else self.step_with_batch_queue"),
    # Per-step arms: the scheduler hook sets the tag on the SchedulerOutput instance, which reaches each worker
    # as that same object (uni) or pickled with its __dict__ (mp: the method name and the batch, through the
    # shared-memory queue, resolved on the worker's WorkerWrapperBase).
    OpenDataclass("v1/core/sched/output.py", "SchedulerOutput"),
    Order(_MP, "MultiprocExecutor.execute_model", first='"execute_model"', then="args=(scheduler_output,)"),
    Snippet("distributed/device_communicators/shm_broadcast.py", "MessageQueue.dequeue", text="pickle.loads("),
    Snippet(_MP, "WorkerProc.__init__", text="wrapper = WorkerWrapperBase("),
    Snippet(_MP, "WorkerProc", text="func = getattr(self.worker, method)"),
    # The worker hook reads the class's own method (`__dict__`): a missing one is a KeyError, a plugin error.
    # The arm is applied from execute_model's first argument.
    Params(_WORKER_BASE, "WorkerWrapperBase.execute_model", names=("self", "scheduler_output")),
    # Control: EngineCore.tuner_control as a utility call, forwarded to the workers by collective_rpc.
    Snippet(_CORE, "EngineCoreProc._handle_client_request", text="getattr(self, method_name)"),
    AssignedIn(_CORE, "EngineCore.__init__", attribute="model_executor"),
    Params("v1/executor/abstract.py", "Executor.collective_rpc", names=("self", "method", "timeout", "args")),
    Defined(_WORKER_BASE, "WorkerBase"),
    Defined(_WORKER_BASE, "WorkerWrapperBase.__getattr__"),
    AssignedIn("v1/engine/llm_engine.py", "LLMEngine.__init__", attribute="engine_core"),
    AssignedIn("v1/engine/async_llm.py", "AsyncLLM.__init__", attribute="engine_core"),
    Defined("v1/engine/core_client.py", "SyncMPClient.call_utility"),
    Defined("v1/engine/core_client.py", "AsyncMPClient.call_utility_async"),
    # Replays (the tuner's side): each starts from an empty prefix cache, in-process or through the development
    # endpoint of a server the tuner starts; vLLM's count of cached prompt tokens comes with every output.
    Defined("v1/engine/llm_engine.py", "LLMEngine.reset_prefix_cache"),
    Defined("v1/engine/async_llm.py", "AsyncLLM.reset_prefix_cache"),
    Defined("entrypoints/serve/dev/cache/api_router.py", "reset_prefix_cache"),
    AssignedIn("outputs.py", "RequestOutput.__init__", attribute="num_cached_tokens"),
    # Prompts go in as rendered token inputs (raw prompt dicts are deprecated): built by `tokens_input`, passed
    # through unrendered by the input processor, offline and streamed.
    Defined("inputs/engine.py", "tokens_input"),
    Snippet("v1/engine/input_processor.py", "InputProcessor.process_inputs", text='and "type" in prompt'),
    # `env:` and `env.VLLM_*` dimensions (the tuner's side, :mod:`tuner.vllm.imports`): vLLM's table of its variables
    # and their parsers checks names and values; its cache of them is dropped while an engine's overlay is set; the
    # Rust front-end's switch is checked where vLLM resolves its binary.
    Defined("envs.py", "environment_variables"),
    Defined("envs.py", "disable_envs_cache"),
    Snippet("envs.py", "environment_variables", text='"VLLM_RUST_FRONTEND_PATH": lambda: _resolve_rust_'),
    # Telemetry: the wait points where a collection is hidden (GC pauses classified hidden or critical).
    *wait_points.REQUIRES,
)
