"""The functions strategies put into vLLM, on small fakes shaped like vLLM's releases (vLLM is not imported)."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest
import torch

from strategies.gc_freeze import rebind
from strategies.sampler_copy_elision import SamplerCopyElision, forcing_copy


class Sampler032:
    """vLLM 0.32's V2 ``Sampler``, reduced to what decides the fp32 copy; returns the arguments it received."""

    def __init__(self, needs_logits_processing: list[bool]) -> None:
        self.needs_logits_processing = np.array(needs_logits_processing)

    def apply_sampling_params(
        self,
        logits: Any,
        expanded_idx_mapping: Any,
        idx_mapping: Any,
        idx_mapping_np: Any,
        pos: Any,
        input_ids: Any,
        expanded_local_pos: Any,
        seq_lens_upper_bound_np: Any,
        skip_top_k_top_p: bool = False,
    ) -> dict[str, Any]:
        return {name: value for name, value in locals().items() if name != "self"}


class Sampler026:
    """vLLM 0.26's V2 ``Sampler``: other parameters (no ``idx_mapping``), no ``needs_logits_processing``."""

    def apply_sampling_params(
        self,
        logits: Any,
        expanded_idx_mapping: Any,
        idx_mapping_np: Any,
        pos: Any,
        input_ids: Any,
        expanded_local_pos: Any,
        skip_top_k_top_p: bool = False,
    ) -> dict[str, Any]:
        return {name: value for name, value in locals().items() if name != "self"}


LOGITS = torch.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=torch.bfloat16)


def _strategy(enabled: bool) -> SamplerCopyElision:
    strategy = SamplerCopyElision()
    strategy.enabled = enabled
    return strategy


@pytest.mark.parametrize(
    ("sampler", "args"),
    [
        (Sampler032([False, True]), (LOGITS, "expanded", "idx", np.array([0]), "pos", "ids", "local", "upper")),
        (Sampler026(), (LOGITS, "expanded", np.array([0]), "pos", "ids", "local")),
    ],
    ids=["0.32", "0.26"],
)
def test_enabled_hands_every_argument_to_vllm_unchanged(sampler: Any, args: tuple[Any, ...]) -> None:
    strategy = _strategy(enabled=True)
    wrapped = forcing_copy(type(sampler).apply_sampling_params, strategy)
    expected = type(sampler).apply_sampling_params(sampler, *args, skip_top_k_top_p=True)
    assert wrapped(sampler, *args, skip_top_k_top_p=True) == expected
    # vLLM's own elision ran (row 0 needs no processing) and is counted as proof; 0.26 has no elision to count
    assert strategy.counters == ({"elided": 1} if hasattr(sampler, "needs_logits_processing") else {})


@pytest.mark.parametrize("by_keyword", [False, True], ids=["positional", "keyword"])
def test_disabled_makes_the_fp32_copy_vllm_elides(by_keyword: bool) -> None:
    strategy = _strategy(enabled=False)
    sampler = Sampler032([False, True, False])
    wrapped = forcing_copy(Sampler032.apply_sampling_params, strategy)
    rows = np.array([0, 2])  # neither request needs logits processing: vLLM returns the logits as they are
    if by_keyword:
        result = wrapped(
            sampler,
            seq_lens_upper_bound_np=None,
            expanded_local_pos=None,
            input_ids=None,
            pos=None,
            idx_mapping_np=rows,
            idx_mapping=None,
            expanded_idx_mapping=None,
            logits=LOGITS,
        )
    else:
        result = wrapped(sampler, LOGITS, None, None, rows, None, None, None, None)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float32
    assert result.data_ptr() != LOGITS.data_ptr() and torch.equal(result, LOGITS.float())
    assert strategy.counters == {"forced_copy": 1}


def test_disabled_leaves_a_batch_that_needs_processing_to_vllm() -> None:
    strategy = _strategy(enabled=False)
    sampler = Sampler032([False, True])
    wrapped = forcing_copy(Sampler032.apply_sampling_params, strategy)
    result = wrapped(sampler, LOGITS, None, None, np.array([0, 1]), None, None, None, None)
    assert isinstance(result, dict) and result["logits"] is LOGITS
    assert strategy.counters == {}


def test_disabled_reads_idx_mapping_np_by_name_not_by_position() -> None:
    """With 0.26's order, the fourth argument is ``pos``, which a positional wrapper took for ``idx_mapping_np``."""

    class Sampler026WithFlags(Sampler026):
        needs_logits_processing = np.array([False, True])

    strategy = _strategy(enabled=False)
    wrapped = forcing_copy(Sampler026.apply_sampling_params, strategy)
    result = wrapped(Sampler026WithFlags(), LOGITS, None, np.array([0]), np.array([1]), None, None)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float32
    assert strategy.counters == {"forced_copy": 1}


def test_rebind_reaches_every_module_that_bound_the_original_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    def original() -> None: ...

    def replacement() -> None: ...

    def unrelated() -> None: ...

    def lazy_getattr(name: str) -> Any:
        raise AssertionError(f"rebind ran a lazy module's __getattr__({name!r})")

    helper = types.ModuleType("fake_gc_utils")
    helper.freeze_gc_heap = original  # type: ignore[attr-defined]
    early = types.ModuleType("fake_early_site")  # `from fake_gc_utils import freeze_gc_heap` before the patch
    early.freeze_gc_heap = original  # type: ignore[attr-defined]
    through_module = types.ModuleType("fake_module_site")  # `from ... import fake_gc_utils`, then an attribute call
    through_module.gc_utils = helper  # type: ignore[attr-defined]
    own = types.ModuleType("fake_own_function")  # its own function of the same name
    own.freeze_gc_heap = unrelated  # type: ignore[attr-defined]
    lazy = types.ModuleType("fake_lazy")
    lazy.__getattr__ = lazy_getattr  # type: ignore[method-assign]
    for module in (helper, early, through_module, own, lazy):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(sys.modules, "fake_blocked", None)  # sys.modules may hold None

    rebind(helper, "freeze_gc_heap", replacement)

    assert helper.freeze_gc_heap is replacement  # type: ignore[attr-defined]
    assert early.freeze_gc_heap is replacement  # type: ignore[attr-defined]
    assert through_module.gc_utils.freeze_gc_heap is replacement  # type: ignore[attr-defined]
    assert own.freeze_gc_heap is unrelated  # type: ignore[attr-defined]
    late: dict[str, Any] = {}
    exec("from fake_gc_utils import freeze_gc_heap", late)  # a module imported after the patch
    assert late["freeze_gc_heap"] is replacement
