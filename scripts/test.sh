#!/usr/bin/env bash
# The test suite: install, lint, type-check, then pytest (the engine tests start the real CPU vLLM).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The worker tests start a throw-away PostgreSQL server from Debian's packages.
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
fi
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
# Bytecode of tuner, strategies and tests is cached in __pycache__ (ignored by git) even where the environment says
# not to: every pytest worker, CLI subprocess and engine process would otherwise compile them again.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff check tuner strategies benchmarks tests
.venv/bin/ruff format --check tuner strategies benchmarks tests
.venv/bin/mypy
# The docs site (docs/, mkdocs.yml): a broken link or anchor, or a page missing from nav, fails. Not --quiet:
# it hides warnings from strict mode's count, so the build would pass (mkdocs/mkdocs#4126).
.venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"
# Without arguments: the tests that need no engine on both cores, then the engine tests one at a time (one engine
# at a time on a 2-core host). `fast`: only the first half, the inner loop. Other arguments go to pytest as they are.
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider --timeout 900)
run() {
  local status=0
  "${PYTEST[@]}" "$@" || status=$?
  if [ "$status" -eq 5 ]; then
    echo "no tests collected" >&2
    return 1
  fi
  return "$status"
}
if [ "$#" -eq 0 ] || [ "$1" = fast ]; then
  run -n 2 --dist worksteal -m "not engine and not slow" --durations=10
  [ "${1:-}" = fast ] || run -m "engine and not slow" --durations=25
else
  run --durations=25 "$@"
fi
