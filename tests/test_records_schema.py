"""``docs/records.md`` documents the record types as they are: every field a writer produces is in its table,
and the tables name no field the records do not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.records.capacity import CapacityRecord, LevelRecord, SearchRecord
from tuner.records.loader import RunRecord, SweepSummary, TrialRow

README = Path(__file__).resolve().parent.parent / "docs" / "records.md"


def table_keys(heading: str) -> set[str]:
    """The field names in the first column of the table under ``### heading``."""
    text = README.read_text()
    assert f"### {heading}" in text, f"docs/records.md has no section {heading!r}"
    section = re.split(r"\n#{2,3} ", text.split(f"### {heading}", 1)[1], maxsplit=1)[0]
    keys: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            keys |= set(re.findall(r"`([a-z_]+)(?:\[\])?`", line.split("|")[1]))
    return keys


def record_keys(record: type) -> set[str]:
    return set(record.__required_keys__) | set(record.__optional_keys__)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("heading", "record"),
    [
        ("`run.json` — `tuner.run/1`", RunRecord),
        ("`sweep/summary.json` — `tuner.sweep/1`", SweepSummary),
        ("A trial in `trials[]`", TrialRow),
        ("`capacity/capacity.json` — `tuner.capacity/1`", CapacityRecord),
        ("The `search` of a capacity record", SearchRecord),
        ("A load in `levels[]`", LevelRecord),
    ],
)
def test_the_schema_tables_list_exactly_the_record_fields(heading: str, record: type) -> None:
    documented = table_keys(heading)
    assert record_keys(record) - documented == set(), "fields the writer produces that the README does not list"
    assert documented - record_keys(record) == set(), "fields the README lists that no record has"


def test_the_table_reader_sees_a_missing_field() -> None:
    """The check has the power to fail: a table missing one field of the record is caught."""
    documented = table_keys("`run.json` — `tuner.run/1`")
    assert record_keys(RunRecord) - (documented - {"memory"}) == {"memory"}
