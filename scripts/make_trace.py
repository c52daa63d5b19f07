"""Write a synthetic Mooncake-format trace: shared-prefix groups, Poisson arrivals and one burst.

    python scripts/make_trace.py                       # experiments/traces/mooncake-sample.jsonl (300 requests)
    python scripts/make_trace.py --requests 1000000 --out /tmp/trace-1m.jsonl

Each request starts with its group's prefix blocks (a system prompt shared by every request of the group; group
popularity is Zipf-like), then one to three blocks of its own; the last block is partial. Arrivals are Poisson at
``--rate`` requests/s, five times faster between 40% and 50% of the trace (the burst). Deterministic in ``--seed``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

GROUPS = 8
BURST = (0.4, 0.5)  # share of the requests sent in the burst window
BURST_FACTOR = 5.0


def trace_lines(requests: int, seed: int, block_size: int, rate: float) -> Iterator[str]:
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, GROUPS + 1)
    groups = rng.choice(GROUPS, size=requests, p=popularity / popularity.sum())
    prefix_blocks = rng.integers(2, 5, size=GROUPS)
    prefixes = []
    next_id = 0
    for blocks in prefix_blocks:
        prefixes.append(list(range(next_id, next_id + int(blocks))))
        next_id += int(blocks)
    own = rng.integers(1, 4, size=requests)
    partial = rng.integers(0, block_size, size=requests)
    outputs = rng.integers(16, 97, size=requests)
    position = np.arange(requests) / max(requests, 1)
    in_burst = (position >= BURST[0]) & (position < BURST[1])
    gaps = rng.exponential(1.0 / rate, size=requests) / np.where(in_burst, BURST_FACTOR, 1.0)
    gaps[0] = 0.0
    times_ms = np.floor(np.cumsum(gaps) * 1000).astype(np.int64)
    for i in range(requests):
        ids = prefixes[groups[i]] + list(range(next_id, next_id + int(own[i])))
        next_id += int(own[i])
        record = {
            "timestamp": int(times_ms[i]),
            "input_length": len(ids) * block_size - int(partial[i]),
            "output_length": int(outputs[i]),
            "hash_ids": ids,
        }
        yield json.dumps(record, separators=(", ", ": "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--block-size", type=int, default=64, help="tokens per hash id (the experiment's block_size)")
    parser.add_argument("--rate", type=float, default=5.0, help="requests/s outside the burst")
    parser.add_argument("--out", type=Path, default=Path("experiments/traces/mooncake-sample.jsonl"))
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for line in trace_lines(args.requests, args.seed, args.block_size, args.rate):
            out.write(line + "\n")
    print(f"wrote {args.requests:,} requests to {args.out}")


if __name__ == "__main__":
    main()
