"""Request files: each format read (good files and a bad line each), selection, generated prompts, context limits,
the workload record and ``tuner workload inspect``. No engine: ``test_trace_replay.py`` replays on one."""

from __future__ import annotations

import io
import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tuner.cli.main import app
from tuner.config import load_experiment
from tuner.errors import UserError
from tuner.measure.workload import dataset_plan
from tuner.records import upgrade_workload
from tuner.report.workload_section import clip_line
from tuner.traffic.dataset import Dataset, Format
from tuner.traffic.formats import READERS, sharegpt
from tuner.traffic.inspect import guess_format, inspect_file
from tuner.traffic.records import BadRecord, TraceRequest
from tuner.traffic.replay import (
    DatasetRequests,
    TokenizerMissing,
    dataset_record,
    engine_requests,
    fit_context,
    read_dataset,
    trace_offsets,
)
from tuner.traffic.selection import Counts
from tuner.traffic.shape import ShapeBuilder, nice_bin
from tuner.traffic.tokens import HashBlocks

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
BUILTIN = {"model": "builtin:opt-tiny"}
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "be", "brief", "only", "question"]


def read(path: Path, fmt: Format, *, engine: dict[str, Any] = BUILTIN, **options: Any) -> DatasetRequests:
    spec = Dataset(path=path, format=fmt, **options)
    return read_dataset(spec, seed=0, engine=engine, max_model_len=None)


def refusal(path: Path, fmt: Format, *, engine: dict[str, Any] = BUILTIN, **options: Any) -> list[str]:
    with pytest.raises(UserError) as caught:
        read(path, fmt, engine=engine, **options)
    return [p.render(caught.value.file) for p in caught.value.problems]


@pytest.fixture(scope="module")
def word_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory with a tiny word-level tokenizer (one id per word of :data:`WORDS`) and a 64-token context."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    directory = tmp_path_factory.mktemp("word-model")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(directory)
    (directory / "config.json").write_text(json.dumps({"model_type": "opt", "max_position_embeddings": 64}))
    return directory


# ----------------------------------------------------------------------------------------------- each format


def test_mooncake_records_give_lengths_times_and_hash_ids() -> None:
    dataset = read(FIXTURES / "mooncake-good.jsonl", Format.MOONCAKE)
    got = [(r.line, r.input_length, r.output_length, r.arrival_s, r.hash_ids) for r in dataset.requests]
    assert got == [(1, 40, 5, 0.0, (0, 1, 2)), (2, 36, 7, 0.25, (0, 1, 3)), (4, 20, 4, 0.5, (4, 5)), (5, 9, 3, 1.5, ())]
    record = dataset.record
    assert record["format"] == "mooncake" and record["requests"] == 4 and record["read_to_end"]
    assert len(record["sha256"]) == 64 and record["bytes"] == (FIXTURES / "mooncake-good.jsonl").stat().st_size


def test_burstgpt_rows_give_lengths_and_times_in_seconds() -> None:
    dataset = read(FIXTURES / "burstgpt-good.csv", Format.BURSTGPT)
    got = [(r.line, r.input_length, r.output_length, r.arrival_s) for r in dataset.requests]
    assert got == [(2, 40, 5, 0.0), (3, 20, 8, 1.5), (4, 12, 3, 4.0)]


def test_jsonl_prompts_are_tokenized_with_the_models_tokenizer(word_model: Path) -> None:
    dataset = read(FIXTURES / "jsonl-good.jsonl", Format.JSONL, engine={"model": str(word_model)})
    assert [(r.input_length, r.output_length) for r in dataset.requests] == [(6, 12), (3, 3)]
    first = dataset.requests[0].prompt_ids
    assert first is not None and list(first) == [WORDS.index(w) + 1 for w in ["the", "cat", "sat", "on", "the", "mat"]]


def test_sharegpt_takes_the_first_human_turn_and_the_length_of_the_reply(word_model: Path) -> None:
    dataset = read(FIXTURES / "sharegpt-good.json", Format.SHAREGPT, engine={"model": str(word_model)})
    # the second conversation starts with a system turn: its prompt is the human turn after it
    assert [(r.line, r.input_length, r.output_length) for r in dataset.requests] == [(2, 6, 6), (9, 3, 2)]


@pytest.mark.parametrize(
    ("name", "fmt", "expected"),
    [
        ("mooncake-bad.jsonl", Format.MOONCAKE, ":2: input_length: expected a whole number, got a string 'many'"),
        ("burstgpt-bad.csv", Format.BURSTGPT, ":3: Response tokens: 0: a failed request in the trace"),
        ("jsonl-bad.jsonl", Format.JSONL, ":2: prompt: empty"),
        ("sharegpt-bad.json", Format.SHAREGPT, ":3: conversations: no human turn followed by a model turn"),
    ],
)
def test_a_bad_record_is_refused_with_file_line_field_and_message(
    name: str, fmt: Format, expected: str, word_model: Path
) -> None:
    path = FIXTURES / name
    lines = refusal(path, fmt, engine={"model": str(word_model)})
    assert len(lines) == 1 and lines[0].startswith(f"{path}{expected}"), lines


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("mooncake-bad.jsonl", Format.MOONCAKE),
        ("burstgpt-bad.csv", Format.BURSTGPT),
        ("jsonl-bad.jsonl", Format.JSONL),
        ("sharegpt-bad.json", Format.SHAREGPT),
    ],
)
def test_on_error_skip_leaves_the_bad_record_out_and_counts_it(name: str, fmt: Format, word_model: Path) -> None:
    dataset = read(FIXTURES / name, fmt, on_error="skip", engine={"model": str(word_model)})
    record = dataset.record
    assert record["bad_skipped"] == 1 and len(record["bad_examples"]) == 1
    assert record["requests"] == record["records_read"] == (1 if fmt is Format.JSONL else 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'{"timestamp": 0, "input_length": 4, "output_length": 1}\n\xff\xfe\n', ":2: not UTF-8: byte 0xff"),
        (b'{"timestamp": 0, "input_length": 4}\n', ":1: output_length: missing"),
        (b'{"timestamp": -1, "input_length": 4, "output_length": 1}\n', ":1: timestamp: must be a finite number >= 0"),
        (b'{"timestamp": 0, "input_length": 0, "output_length": 1}\n', ":1: input_length: must be at least 1, got 0"),
        (b"[1, 2]\n", ":1: expected a JSON object, got a list"),
        (b'{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1, -2]}\n', ":1: hash_ids[1]:"),
        (
            b'{"timestamp": 9, "input_length": 4, "output_length": 1}\n{"timestamp": 3, "input_length": 4, '
            b'"output_length": 1}\n',
            ":2: timestamp: earlier than line 1's: a trace must be in time order",
        ),
        (b'{"timestamp": 0, "input_length": 4, "output_length": 1', ":1: not JSON: Expecting ',' delimiter"),
    ],
)
def test_mooncake_line_problems_are_named(tmp_path: Path, text: bytes, expected: str) -> None:
    (path := tmp_path / "t.jsonl").write_bytes(text)
    lines = refusal(path, Format.MOONCAKE)
    assert lines[0].startswith(f"{path}{expected}"), lines


def test_a_file_that_cannot_be_read_as_its_format_is_refused_whatever_on_error_says(tmp_path: Path) -> None:
    (csv := tmp_path / "t.csv").write_text("time,tokens\n0,4\n")
    assert refusal(csv, Format.BURSTGPT, on_error="skip")[0].startswith(f"{csv}:1: header: no column 'Timestamp'")
    (array := tmp_path / "t.json").write_text('[{"conversations": []}\n{"conversations": []}]')
    assert refusal(array, Format.SHAREGPT, on_error="skip")[0].startswith(f"{array}:2: expected ',' or ']'")
    (obj := tmp_path / "o.json").write_text('{"conversations": []}')
    assert refusal(obj, Format.SHAREGPT)[0].startswith(f"{obj}:1: expected a JSON array")


def test_refusing_stops_after_twenty_bad_records(tmp_path: Path) -> None:
    (path := tmp_path / "t.jsonl").write_text("not json\n" * 1000)
    lines = refusal(path, Format.MOONCAKE)
    assert len(lines) == 21 and lines[-1].endswith("stopped after 20 bad records (on_error: skip skips them)")


def test_the_sharegpt_array_is_read_element_by_element_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    elements = [
        {"conversations": [{"from": "human", "value": f"q{i}"}, {"from": "gpt", "value": "é" * i}]} for i in range(50)
    ]
    text = "[\n" + ",\n".join(json.dumps(e, ensure_ascii=False) for e in elements) + "\n]\n"
    monkeypatch.setattr(sharegpt, "CHUNK_BYTES", 7)  # elements and multi-byte characters split across reads
    records = list(READERS[Format.SHAREGPT](io.BytesIO(text.encode())))
    assert [(r.line, r.prompt, r.completion) for r in records if isinstance(r, TraceRequest)] == [
        (i + 2, f"q{i}", "é" * i) for i in range(1, 50)
    ]
    assert [(r.line, r.field) for r in records if isinstance(r, BadRecord)] == [(2, "conversations")]  # empty reply


def test_text_formats_need_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(TokenizerMissing, match="the bundled builtin:opt-tiny has no tokenizer"):
        read(FIXTURES / "jsonl-good.jsonl", Format.JSONL)
    with pytest.raises(TokenizerMissing, match="no tokenizer for"):
        read(FIXTURES / "jsonl-good.jsonl", Format.JSONL, engine={"model": str(tmp_path)})


# ------------------------------------------------------------------------------------------------ selection


def _trace(tmp_path: Path, n: int, gap_ms: int = 100) -> Path:
    lines = [json.dumps({"timestamp": i * gap_ms, "input_length": 8 + i % 5, "output_length": 2}) for i in range(n)]
    (path := tmp_path / "trace.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_first_n_stops_reading_and_says_so(tmp_path: Path) -> None:
    dataset = read(_trace(tmp_path, 100), Format.MOONCAKE, num_prompts=10)
    assert [r.line for r in dataset.requests] == list(range(1, 11))
    assert dataset.record["records_read"] == 10 and not dataset.record["read_to_end"]


def test_a_random_sample_is_seeded_uniform_and_in_file_order(tmp_path: Path) -> None:
    path = _trace(tmp_path, 200)
    spec = Dataset(path=path, format=Format.MOONCAKE, num_prompts=20, sample="random")

    def lines(seed: int) -> list[int]:
        return [r.line for r in read_dataset(spec, seed=seed, engine=BUILTIN, max_model_len=None).requests]

    first = lines(0)
    assert first == lines(0) and first != lines(1)
    assert len(set(first)) == 20 and first == sorted(first)
    # Uniform over the file: each line's inclusion rate over 300 seeds is near 20/200 (binomial SD 0.017 at n=300,
    # so the mean over the first and the last 100 lines each stays within 0.03 of 0.1 with probability > 0.999).
    counts = np.zeros(201)
    for seed in range(300):
        counts[lines(seed)] += 1
    rates = counts[1:] / 300
    assert abs(rates[:100].mean() - 0.1) < 0.03 and abs(rates[100:].mean() - 0.1) < 0.03


def test_the_time_window_and_the_time_scale(tmp_path: Path) -> None:
    path = _trace(tmp_path, 100)  # a request every 0.1 s
    dataset = read(path, Format.MOONCAKE, start_s=2.0, duration_s=1.0, schedule="trace", time_scale=0.5)
    assert [r.line for r in dataset.requests] == list(range(21, 31))
    assert dataset.record["before_window"] == 20 and not dataset.record["read_to_end"]
    assert trace_offsets(dataset.requests, 0.5) == pytest.approx([i * 0.05 for i in range(10)])


def test_nothing_selected_is_refused(tmp_path: Path) -> None:
    assert "no request selected" in refusal(_trace(tmp_path, 10), Format.MOONCAKE, start_s=100)[0]


# ----------------------------------------------------------------------------------- prompts and the context


def test_the_same_hash_id_gives_the_same_tokens_in_every_request_and_run() -> None:
    blocks = HashBlocks(block_size=4, seed=3, vocab_size=1000)
    a = blocks.prompt(TraceRequest(line=1, input_length=10, output_length=1, hash_ids=(7, 8, 9)))
    b = blocks.prompt(TraceRequest(line=2, input_length=7, output_length=1, hash_ids=(7, 8)))
    c = HashBlocks(block_size=4, seed=3, vocab_size=1000).prompt(
        TraceRequest(line=5, input_length=5, output_length=1, hash_ids=(8, 7))
    )
    assert len(a) == 10 and len(b) == 7 and len(c) == 5
    assert a[:7] == b[:7]  # blocks 7 and 8, the second cut where b's prompt ends
    assert c[:4] == a[4:8] and c[4] == a[0]  # id 8, then id 7: the same tokens wherever the id is
    assert a[:4] != a[4:8]  # different ids, different blocks
    assert all(10 <= t < 999 for t in a)


def test_tokens_beyond_the_hash_ids_belong_to_their_request_alone() -> None:
    blocks = HashBlocks(block_size=4, seed=0, vocab_size=1000)
    one = blocks.prompt(TraceRequest(line=1, input_length=12, output_length=1, hash_ids=(1,)))
    two = blocks.prompt(TraceRequest(line=2, input_length=12, output_length=1, hash_ids=(1,)))
    assert one[:4] == two[:4] and one[4:] != two[4:] and len(one) == len(two) == 12


def test_engine_requests_keep_lengths_and_tokenized_ids(word_model: Path) -> None:
    mooncake = read(FIXTURES / "mooncake-good.jsonl", Format.MOONCAKE)
    specs = engine_requests(mooncake, block_size=16, seed=0, vocab_size=500)
    assert [(len(s.prompt_token_ids), s.max_tokens) for s in specs] == [(40, 5), (36, 7), (20, 4), (9, 3)]
    assert specs[0].prompt_token_ids[:32] == specs[1].prompt_token_ids[:32]  # hash ids 0, 1 shared
    text = read(FIXTURES / "jsonl-good.jsonl", Format.JSONL, engine={"model": str(word_model)})
    ids = engine_requests(text, block_size=16, seed=0, vocab_size=500)[1].prompt_token_ids
    assert ids == [WORDS.index(w) + 1 for w in ["a", "dog", "ran"]]


def test_too_long_requests_are_refused_by_line_or_clipped_and_counted(tmp_path: Path) -> None:
    path = _trace(tmp_path, 3)  # prompts 8, 9, 10; outputs 2
    spec = Dataset(path=path, format=Format.MOONCAKE)
    with pytest.raises(UserError) as caught:
        read_dataset(spec, seed=0, engine=BUILTIN, max_model_len=11)
    rendered = [p.render(caught.value.file) for p in caught.value.problems]
    assert rendered == [
        f"{path}:3: 10 + 2 tokens, more than max_model_len 11",
        f"{path}: 1 request is too long in all (too_long: clip clips them)",
    ]
    clipped = read_dataset(spec.model_copy(update={"too_long": "clip"}), seed=0, engine=BUILTIN, max_model_len=11)
    assert [(r.input_length, r.output_length) for r in clipped.requests] == [(8, 2), (9, 2), (9, 2)]
    assert (clipped.record["clipped"], clipped.record["output_clipped"]) == (1, 0)


@pytest.mark.parametrize(
    ("lengths", "max_model_len", "clipped"),
    [
        ((126_000, 300), 640, (340, 300)),  # a long-context trace on a small model: the decode is kept
        ((5, 20), 11, (1, 10)),  # an output longer than the context: one prompt token, the rest decodes
        ((9, 2), 11, (9, 2)),  # fits: unchanged
    ],
)
def test_clipping_shortens_the_prompt_first_and_keeps_its_prefix(
    lengths: tuple[int, int], max_model_len: int, clipped: tuple[int, int]
) -> None:
    prompt, output = lengths
    request = TraceRequest(line=1, input_length=prompt, output_length=output, prompt_ids=tuple(range(prompt)))
    spec = Dataset(path=Path("trace.jsonl"), format=Format.MOONCAKE, too_long="clip")
    (fitted,), counted = fit_context([request], spec, max_model_len, "trace.jsonl")
    assert (fitted.input_length, fitted.output_length) == clipped
    assert fitted.prompt_ids == tuple(range(clipped[0]))
    changed = clipped != lengths
    assert counted == (changed, changed and clipped[1] < output)  # each kind of clip counted apart


def test_the_workload_section_says_how_many_outputs_were_clipped_too() -> None:
    request = TraceRequest(line=1, input_length=4, output_length=2)
    spec = Dataset(path=Path("trace.jsonl"), format=Format.MOONCAKE, too_long="clip")
    _, counted = fit_context(
        [request, replace(request, output_length=30), replace(request, input_length=10)], spec, 11, "t"
    )
    record = dataset_record(spec, Counts(), 0, "", requests=3, clipped=counted)
    assert (record["clipped"], record["output_clipped"]) == (2, 1)
    assert clip_line(record) == "2 clipped to max_model_len (prompt first; 1 of them also lost output tokens)"
    older: dict[str, Any] = {"dataset": {**record}}
    del older["dataset"]["output_clipped"]  # a record written before outputs were counted apart
    upgrade_workload(older)
    assert clip_line(older["dataset"]) == "2 clipped to max_model_len (prompt first)"


# ------------------------------------------------------------------------------------ shape and the record


def test_the_shape_summarises_lengths_arrivals_and_prefix_reuse() -> None:
    builder = ShapeBuilder()
    for i in range(100):
        builder.add(10 + i, 5, i * 0.1, (0, 1, 100 + i))
    shape = builder.shape()
    assert shape["requests"] == 100
    assert shape["input_tokens"]["min"] == 10 and shape["input_tokens"]["max"] == 109
    assert shape["input_tokens"]["total"] == sum(range(10, 110))
    assert sum(shape["input_histogram"]["counts"]) == sum(shape["output_histogram"]["counts"]) == 100
    arrivals = shape["arrivals"]
    assert arrivals is not None and sum(arrivals["counts"]) == 100
    assert arrivals["mean_rate"] == pytest.approx(10.0) and arrivals["duration_s"] == pytest.approx(9.9)
    assert shape["prefix_reuse"] == pytest.approx(1 - 102 / 300)  # ids 0 and 1 are new once, then reused
    assert ShapeBuilder().shape()["arrivals"] is None


def test_hash_ids_are_merged_in_bounded_chunks_without_changing_the_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    import tuner.traffic.shape as shape_module

    def reuse() -> float | None:
        builder = ShapeBuilder()
        for i in range(500):
            builder.add(4, 1, None, (i % 37, 1000 + i))
        return builder.shape()["prefix_reuse"]

    whole = reuse()
    monkeypatch.setattr(shape_module, "MERGE_IDS", 16)
    assert reuse() == whole == pytest.approx(1 - (37 + 500) / 1000)


@pytest.mark.parametrize(
    ("duration", "requests", "width"), [(100.0, 10_000, 2.0), (4.4, 80, 0.5), (1e5, 10**6, 2000.0)]
)
def test_arrival_bins_are_round_and_not_too_sparse(duration: float, requests: int, width: float) -> None:
    assert nice_bin(duration, requests) == width


def test_an_experiment_records_its_dataset_and_how_it_is_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parent.parent)
    experiment = load_experiment("experiments/traces/mooncake-sample.yaml")
    dataset, offsets, record = dataset_plan(experiment)
    assert record["source"] == "dataset" and record["replay"] == "at their recorded times x 0.4"
    assert record["dataset"] is not None and record["dataset"]["requests"] == len(offsets) == 80
    assert record["dataset"]["before_window"] == 100
    assert offsets[0] == 0.0 and offsets == sorted(offsets)
    assert record["shape"]["prefix_reuse"] is not None and record["shape"]["prefix_reuse"] > 0.3
    assert [r.line for r in dataset.requests] == list(range(101, 181))


# ------------------------------------------------------------------------------------------------ inspect


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("mooncake-good.jsonl", Format.MOONCAKE),
        ("jsonl-good.jsonl", Format.JSONL),
        ("burstgpt-good.csv", Format.BURSTGPT),
        ("sharegpt-good.json", Format.SHAREGPT),
    ],
)
def test_the_format_is_guessed_from_the_name_or_the_first_record(name: str, fmt: Format) -> None:
    assert guess_format(FIXTURES / name) is fmt


def test_inspect_reads_a_whole_trace(tmp_path: Path) -> None:
    record = inspect_file(_trace(tmp_path, 300), Format.MOONCAKE)
    assert record["shape"]["requests"] == 300 and record["dataset"] is not None
    assert record["dataset"]["read_to_end"]
    assert record["shape"]["arrivals"] is not None and record["shape"]["arrivals"]["duration_s"] == pytest.approx(29.9)


def test_workload_inspect_prints_the_summary_and_writes_the_plot(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["workload", "inspect", str(FIXTURES / "mooncake-good.jsonl"), "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "requests: 4 replayed of 4 good records read" in result.output
    assert "prefix reuse: 25.0% of hash-id blocks"  # 8 ids, 6 distinct in result.output
    assert (tmp_path / "workload.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "workload.json").read_text())["shape"]["requests"] == 4


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([str(FIXTURES / "mooncake-bad.jsonl")], "mooncake-bad.jsonl:2: input_length: expected a whole number"),
        ([str(FIXTURES / "jsonl-good.jsonl")], "jsonl prompts are text: give --tokenizer MODEL"),
        (["/dev/null", "--format", "mooncake"], "cannot read: not a regular file"),
        ([str(FIXTURES)], "is a directory"),
        ([str(FIXTURES / "no.jsonl")], "file not found"),
        (
            [str(Path(__file__).parent / "bad_inputs" / "rate_negative.yaml")],
            "workload.rate: Input should be greater than 0",
        ),
    ],
)
def test_workload_inspect_refuses_bad_input_in_one_line(args: list[str], expected: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["workload", "inspect", *args, "-o", str(tmp_path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert expected in result.stderr and "Traceback" not in result.output


def test_workload_inspect_with_skip_bad_counts_what_it_skipped(tmp_path: Path) -> None:
    args = ["workload", "inspect", str(FIXTURES / "mooncake-bad.jsonl"), "--skip-bad", "-o", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 bad records skipped" in result.output and "line 2: input_length" in result.output


@pytest.mark.parametrize(
    ("fixture", "result"), [("run", "run/run.json"), ("sweep-exp", "sweep-exp/sweep/summary.json")]
)
def test_reports_show_the_workload_they_hold_for(fixture: str, result: str, tmp_path: Path) -> None:
    from tuner.report.build import build_report

    fixtures = Path(__file__).parent / "fixtures"
    data = json.loads((fixtures / result).read_text())
    data["workload"] = inspect_file(FIXTURES / "mooncake-good.jsonl", Format.MOONCAKE)
    (path := tmp_path / result).parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    paths = build_report(path)
    assert "workload.png" in {p.name for p in paths}
    text = next(p for p in paths if p.name == "report.md").read_text()
    assert "## Workload" in text and "mooncake-good.jsonl (mooncake, sha256" in text
    assert "| prompt tokens | 9 | 28 |" in text and "](workload.png)" in text


def test_the_workload_plot_keeps_its_tick_labels_apart_at_long_context_lengths(tmp_path: Path) -> None:
    """Prompts of 0.9k-126k tokens (Mooncake's conversation trace) printed their length ticks into one another."""
    from matplotlib import image

    from tuner.report.workload_section import workload_plot

    rng = np.random.default_rng(0)
    builder = ShapeBuilder()
    for i, prompt in enumerate(rng.integers(900, 126_000, 2000)):
        builder.add(int(prompt), int(rng.integers(1, 1_200)), i * 0.3)
    rendered: list[Any] = []
    with pytest.MonkeyPatch.context() as patch:
        import tuner.report.figures as figures

        real_save = figures.save_figure
        patch.setattr(figures, "save_figure", lambda fig, path: (rendered.append(fig), real_save(fig, path))[1])
        path = workload_plot(tmp_path / "workload.png", builder.shape(), title="mooncake")
    assert image.imread(path).shape[0] > 0
    (fig,) = rendered
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:2]:
        low, high = ax.get_xlim()
        shown = [label for label in ax.get_xticklabels() if label.get_text() and low <= label.get_position()[0] <= high]
        boxes = [label.get_window_extent(renderer) for label in shown]
        assert len(boxes) >= 3
        boxes.sort(key=lambda box: box.x0)
        gaps = [right.x0 - left.x1 for left, right in itertools.pairwise(boxes)]
        assert min(gaps) > 0, [label.get_text() for label in shown]


def test_a_trace_is_read_once_and_re_timed_at_every_load_as_reading_it_anew_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capacity search prepares its trace once (read, selected, its token ids built) and sends it at each load
    with only the send times and the record changed: at twice and half the recorded speed the requests are the
    same objects, the send times those of the trace read anew at that load, and the file was read once."""
    from tuner.capacity.load import at_load
    from tuner.config import Experiment, LoadKnob
    from tuner.measure import workload

    path = _trace(tmp_path, 50)
    exp = Experiment.model_validate(
        {
            "name": "retimed",
            "engine": BUILTIN,
            "workload": {"dataset": {"path": str(path), "format": "mooncake", "schedule": "trace"}},
            "output_dir": str(tmp_path),
        }
    )
    reads: list[Path] = []
    original = workload.read_dataset

    def counted(spec: Dataset, **kwargs: Any) -> DatasetRequests:
        reads.append(spec.path)
        return original(spec, **kwargs)

    monkeypatch.setattr(workload, "read_dataset", counted)
    prepared = workload.prepare(exp, vocab_size=1000)
    fast, slow = (prepared.at(at_load(exp, LoadKnob.SPEED, load)) for load in (2.0, 0.5))
    assert len(reads) == 1 and fast.requests is slow.requests is prepared.requests
    twice = at_load(exp, LoadKnob.SPEED, 2.0)
    anew = workload.prepare(twice, vocab_size=1000).at(twice)
    assert fast.offsets == pytest.approx(anew.offsets) and fast.requests == anew.requests
    assert fast.record == anew.record and fast.record["replay"] != slow.record["replay"]
    assert slow.offsets == pytest.approx([4 * t for t in fast.offsets])
