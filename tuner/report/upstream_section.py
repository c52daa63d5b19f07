"""Where vLLM itself stands on each strategy of a run or a sweep, for the vLLM release that was measured: a winner
vLLM already ships as its default means its `false` arm was the question, and one vLLM lacks is a change to deploy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from tuner.report.describe import vllm_releases
from tuner.report.document import Doc


def measured_vllm(environment: Mapping[str, Any]) -> str | None:
    """The vLLM release of a record's environment (the GPU wheel's, else the CPU build's)."""
    return next(iter(vllm_releases(environment).values()), None)


def upstream_section(doc: Doc, names: Iterable[str], environment: Mapping[str, Any]) -> None:
    """One line per strategy named in the record; nothing when none is."""
    from strategies import strategy_classes

    wanted = sorted(set(names))
    if not wanted:
        return
    release = measured_vllm(environment)
    try:
        version = Version(release) if release else None
    except InvalidVersion:
        version = None
    classes = strategy_classes()
    doc.h("Where vLLM stands")
    doc.p(f"Each strategy against the vLLM release that was measured ({release or 'unknown'}):")
    doc.bullets(
        [
            f"`{name}`: "
            + (classes[name].upstream.status(version) if name in classes else "not installed here: status unknown")
            for name in wanted
        ]
    )
