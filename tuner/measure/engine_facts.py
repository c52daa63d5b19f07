"""What the engine's processes said of a step comparison when it stopped: its time, what loaded it, and its GC."""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.measure.worker_gc import ArmPacing, GcPause, arm_pacing, engine_pauses, is_engine_process, is_worker_only
from tuner.plugin.protocol import ProcessReport


@dataclass(frozen=True)
class EngineFacts:
    """What the engine's processes said of a comparison when it stopped (nothing for blocks alone)."""

    elapsed_s: float = 0.0
    driven_by: str = "offline batches"  # what loaded the engine: offline batches, or the workload's arrivals
    gen0_collections: int = 0  # the most any engine process made during the comparison
    gc_share: float = 0.0  # the largest share of time any engine process spent collecting
    gc_pauses: list[GcPause] = field(default_factory=list)  # every engine process's collections, in time order
    paced: dict[int, ArmPacing] = field(default_factory=dict)  # per engine process: each arm's thresholds, allocations
    worker_pauses_dropped: int = 0  # worker GC pauses the probes' rings no longer held: not in any step's GC time

    @classmethod
    def of(cls, stopped: list[ProcessReport], *, elapsed_s: float, driven_by: str) -> EngineFacts:
        engine = [r for r in stopped if is_engine_process(r)]
        return cls(
            elapsed_s=elapsed_s,
            driven_by=driven_by,
            gen0_collections=max((r["gc"]["collections"][0] for r in engine), default=0),
            gc_share=max((r["gc"]["gc_share"] for r in engine), default=0.0),
            gc_pauses=engine_pauses(stopped),
            paced=arm_pacing(stopped),
            worker_pauses_dropped=sum(r["gc"]["pauses"]["dropped"] for r in stopped if is_worker_only(r)),
        )
