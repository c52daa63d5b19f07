"""Static compatibility check: what the plugin and every strategy need from vLLM, on each release of the support
matrix (the GPU wheels' Python sources, never imported) and on the installed vLLM.

A download failure fails these tests: the check is the only proof that the GPU releases still fit.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from strategies import strategy_classes
from strategies.framework import TESTED_VLLM, admits, installed_root, source_version, unmet
from strategies.sampler_copy_elision import SamplerCopyElision
from tests.vllm_sources import MATRIX, gpu_vllm_source
from tuner.plugin.hook_requirements import REQUIRES as PLUGIN_REQUIRES

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def compat_problems(vllm_root: Path) -> list[str]:
    """Each way the tree breaks the declarations, one line naming the release, the plugin or strategy, the symbol
    and the file: a plugin requirement unmet, a requirement unmet where the strategy claims support, or a claimed
    lack of support that no requirement backs."""
    version = source_version(vllm_root)
    assert version is not None, f"{vllm_root} has no vllm/_version.py"
    problems = [f"vLLM {version}: plugin: {problem}" for problem in unmet(PLUGIN_REQUIRES, vllm_root)]
    for name, cls in strategy_classes().items():
        found = unmet(cls.requires, vllm_root)
        if admits(cls.vllm_versions, version):
            problems += [f"vLLM {version}: {name}: {problem}" for problem in found]
        elif not found:
            problems.append(
                f"vLLM {version}: {name}: declared unsupported ({cls.vllm_versions}) yet meets its requires"
            )
    return problems


def _tree(release: str) -> Path:
    if release == "installed":
        root = installed_root()
        assert root is not None, "vLLM is not installed"
        return root
    return gpu_vllm_source(release)


@pytest.mark.parametrize("release", [*MATRIX, "installed"])
def test_release_meets_the_declarations(release: str) -> None:
    problems = compat_problems(_tree(release))
    assert not problems, "\n".join(problems)


def test_sampler_copy_elision_is_refused_on_the_floor_because_it_never_copies() -> None:
    assert not admits(SamplerCopyElision.vllm_versions, Version(MATRIX[0]))
    problems = unmet(SamplerCopyElision.requires, _tree(MATRIX[0]))
    assert problems[0].startswith("Sampler.__init__ at vllm/v1/worker/gpu/sample/sampler.py:")
    assert problems[0].endswith("does not assign self.needs_logits_processing")
    assert any(
        p.startswith("`torch.empty_like(logits, dtype=torch.float32).copy_(logits)` occurs 0 times") for p in problems
    )


@pytest.mark.parametrize("release", ["0.27.0", "0.27.1"])
def test_sampler_copy_elision_is_refused_on_0_27_whose_elision_has_no_flags_to_read(release: str) -> None:
    """0.27 makes and elides the copy, but decides per batch in a method: the patch reads the flags 0.28 added."""
    assert not admits(SamplerCopyElision.vllm_versions, Version(release))
    problems = unmet(SamplerCopyElision.requires, _tree(release))
    assert problems[0].endswith("does not assign self.needs_logits_processing")
    assert not any("torch.empty_like" in p for p in problems)  # the copy is there


def test_a_release_declared_unsupported_must_fail_a_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SamplerCopyElision, "vllm_versions", ">=0.33,<0.34")
    assert compat_problems(_tree("0.32.0")) == [
        "vLLM 0.32.0: sampler_copy_elision: declared unsupported (>=0.33,<0.34) yet meets its requires"
    ]


def test_the_matrix_spans_the_gpu_extra() -> None:
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["gpu"]
    assert extra == [f"vllm{TESTED_VLLM}"]
    floor = next(spec.version for spec in SpecifierSet(TESTED_VLLM) if spec.operator == ">=")
    assert Version(floor) == Version(MATRIX[0])
    assert all(admits(TESTED_VLLM, Version(release)) for release in MATRIX)


# What a mutation of one file of 0.32.0 breaks: (plugin or strategy, file in vllm/, text, mutated text, named).
MUTATIONS = [
    pytest.param(
        "sampler_copy_elision",
        "v1/worker/gpu/sample/sampler.py",
        "self.needs_logits_processing = ",
        "self.needs_processing = ",
        ("Sampler.__init__", "self.needs_logits_processing"),
        id="attribute",
    ),
    pytest.param(
        "ndarray_outputs",
        "v1/worker/gpu_model_runner.py",
        "valid_sampled_token_ids[int(i)].clear()",
        "del valid_sampled_token_ids[int(i)][:]",
        ("GPUModelRunner._bookkeeping_sync", "valid_sampled_token_ids[int(i)].clear()"),
        id="rewrite-anchor",
    ),
    pytest.param(
        "ndarray_outputs",
        "v1/worker/gpu/async_utils.py",
        "del token_ids[num_tokens:]",
        "token_ids[num_tokens:] = []",
        ("AsyncOutput.get_output", "del token_ids[num_tokens:]"),
        id="v2-rewrite-anchor",
    ),
    pytest.param(
        "plugin",
        "v1/engine/core.py",
        "def step_with_batch_queue(",
        "def step_batched(",
        ("EngineCore.step_with_batch_queue",),
        id="method",
    ),
    pytest.param(
        "plugin",
        "v1/core/sched/output.py",
        "@dataclass\nclass SchedulerOutput:",
        "@dataclass(slots=True)\nclass SchedulerOutput:",
        ("SchedulerOutput", "vllm/v1/core/sched/output.py", "slots=True"),
        id="slots-dataclass",
    ),
    pytest.param(
        "gc_freeze",
        "entrypoints/launchers/utils/server_utils.py",
        "from vllm.utils.gc_utils import freeze_gc_heap",
        "from vllm.utils.gc_utils import freeze_gc_heap as freeze_heap",
        ("freeze_gc_heap as freeze_heap",),
        id="call-site-alias",
    ),
    pytest.param(
        "shm_spin_window",
        "distributed/device_communicators/shm_broadcast.py",
        "if current_time <= self.last_read + self.busy_loop_s:",
        "if current_time <= self.last_read + self.spin_s:",
        ("SpinCondition.wait", "self.busy_loop_s"),
        id="spin-window-read",
    ),
    pytest.param(
        "gc_freeze",
        "v1/engine/core.py",
        "        freeze_gc_heap()\n",
        "        gc.freeze()\n",
        ("gc.freeze()", "EngineCore.__init__"),
        id="direct-gc-freeze",
    ),
]


def _copy_needed(source: Path, into: Path) -> Path:
    """Copy only the files the declarations read (and ``_version.py``) to ``into/vllm``."""
    requires = [*PLUGIN_REQUIRES, *(r for cls in strategy_classes().values() for r in cls.requires)]
    needed = {"_version.py", *(path for r in requires for path in r.files(source))}
    for path in needed:
        (into / "vllm" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / path, into / "vllm" / path)
    return into / "vllm"


@pytest.mark.parametrize(("owner", "path", "old", "new", "named"), MUTATIONS)
def test_a_removed_symbol_fails_the_check_naming_owner_symbol_and_file(
    tmp_path: Path, owner: str, path: str, old: str, new: str, named: tuple[str, ...]
) -> None:
    mutated = _copy_needed(_tree("0.32.0"), tmp_path)
    text = (mutated / path).read_text()
    assert old in text, f"the mutation no longer applies to vllm/{path}"
    (mutated / path).write_text(text.replace(old, new, 1))

    problems = compat_problems(mutated)
    assert len(problems) == 1, "\n".join(problems)  # the mutation's, and none from copying only some files
    assert problems[0].startswith(f"vLLM 0.32.0: {owner}: ")
    assert f"vllm/{path}" in problems[0]
    assert all(fragment in problems[0] for fragment in named), problems[0]
