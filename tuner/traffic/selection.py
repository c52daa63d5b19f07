"""Which records of a file are replayed: the time window, the first N or a seeded sample, bad records refused or
skipped (and counted). Streams: nothing but the selected records (and only for a sample) is held."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from tuner.errors import Problem, UserError
from tuner.traffic.dataset import Dataset, Format
from tuner.traffic.records import BadFile, BadRecord, TraceRequest

MAX_REPORTED = 20
"""Bad records listed before reading stops (``on_error: refuse``) or in the record (``on_error: skip``)."""

TIME_FIELD = {Format.MOONCAKE: "timestamp", Format.BURSTGPT: "Timestamp"}


@dataclass
class Counts:
    """What selecting did to the file, for the record: nothing is left out silently."""

    records: int = 0  # good records read
    bad: int = 0  # records skipped as bad (on_error: skip)
    bad_examples: list[str] = field(default_factory=list)  # the first few, as "line N: field: message"
    before_window: int = 0
    read_to_end: bool = True  # False when reading stopped at num_prompts or at the window's end


class Selection:
    """Iterate to get the selected records in file order; ``counts`` is complete once iteration ends.

    ``records`` is a format reader's output over ``file``; bad records raise :class:`UserError` naming the file,
    the line and the field (up to :data:`MAX_REPORTED` of them) unless ``spec.on_error`` is ``skip``.
    """

    def __init__(self, records: Iterator[TraceRequest | BadRecord], spec: Dataset, seed: int, file: str) -> None:
        self._records = records
        self._spec = spec
        self._seed = seed
        self._file = file
        self.counts = Counts()

    def __iter__(self) -> Iterator[TraceRequest]:
        if self._spec.sample == "random":
            yield from self._sample()
        else:
            yield from self._good()

    def _sample(self) -> Iterator[TraceRequest]:
        """Algorithm R: a uniform sample of ``num_prompts`` records in one pass, then put back in file order."""
        n = self._spec.num_prompts
        assert n is not None  # the spec refuses `random` without it
        rng = np.random.default_rng(self._seed)
        kept: list[TraceRequest] = []
        for seen, record in enumerate(self._good()):
            if seen < n:
                kept.append(record)
            elif (slot := int(rng.integers(0, seen + 1))) < n:
                kept[slot] = record
        yield from sorted(kept, key=lambda r: r.line)

    def _good(self) -> Iterator[TraceRequest]:
        spec, counts = self._spec, self.counts
        limit = spec.num_prompts if spec.sample == "first" else None
        problems: list[Problem] = []
        first: float | None = None
        previous: TraceRequest | None = None
        taken = 0
        try:
            for record in self._records:
                if isinstance(record, TraceRequest) and spec.format.timed:
                    record = self._in_order(record, previous)
                if isinstance(record, BadRecord):
                    self._bad(record, problems)
                    continue
                counts.records += 1
                previous = record
                if record.arrival_s is not None:
                    first = record.arrival_s if first is None else first
                    since = record.arrival_s - first
                    if since < spec.start_s:
                        counts.before_window += 1
                        continue
                    if spec.duration_s is not None and since >= spec.start_s + spec.duration_s:
                        counts.read_to_end = False
                        break
                taken += 1
                yield record
                if limit is not None and taken >= limit:
                    counts.read_to_end = False
                    break
        except BadFile as exc:
            problems.append(Problem(exc.message, line=exc.line))
        if problems:
            raise UserError(self._file, problems)

    def _in_order(self, record: TraceRequest, previous: TraceRequest | None) -> TraceRequest | BadRecord:
        if previous is None or record.arrival_s is None or previous.arrival_s is None:
            return record
        if record.arrival_s >= previous.arrival_s:
            return record
        return BadRecord(
            record.line,
            TIME_FIELD[self._spec.format],
            f"earlier than line {previous.line}'s: a trace must be in time order",
        )

    def _bad(self, record: BadRecord, problems: list[Problem]) -> None:
        if self._spec.on_error == "refuse":
            problems.append(Problem(record.message, record.field, record.line))
            if len(problems) >= MAX_REPORTED:
                problems.append(Problem(f"stopped after {MAX_REPORTED} bad records (on_error: skip skips them)"))
                raise UserError(self._file, problems)
            return
        self.counts.bad += 1
        if len(self.counts.bad_examples) < MAX_REPORTED:
            where = f"line {record.line}: {record.field}: " if record.field else f"line {record.line}: "
            self.counts.bad_examples.append(where + record.message)
