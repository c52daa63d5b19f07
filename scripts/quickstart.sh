#!/usr/bin/env bash
# The main job: install, then a small real sweep on the embedded CPU engine, then its report.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
# --resume: running it again continues (or just re-summarises) the same study instead of failing.
status=0
# First what a comparison costs on this host (A/A per method, known delays): the sweep takes its block length.
# A failed calibration is said and kept in the exit status, and the sweep runs with its default block length.
.venv/bin/tuner calibrate experiments/quickstart.yaml || {
  status=$?
  echo "quickstart: the calibration failed (exit $status); the sweep compares at its default block length" >&2
}
.venv/bin/tuner sweep experiments/quickstart.yaml --resume || status=$?
# The report shows whatever the study holds, also after a failed or interrupted sweep; the sweep's status wins.
.venv/bin/tuner report results/quickstart
exit "$status"
