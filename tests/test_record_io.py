"""Reading a sweep record (specsim.analysis.record_io): the checksum rebuilt from the file's text decides exactly as
the rule (json.loads, then body_checksum of the whole record) decides, and a file read again is neither parsed
again nor shared with an earlier caller."""

from __future__ import annotations

import json
import math

import pytest

from specsim.analysis import record_io
from specsim.analysis.record_io import body_checksum, read_record, record_is_valid
from specsim.analysis.sweep_records import load_records, points_dir, unreadable_records
from specsim.sweep.store import write_record


def _record(rid: str = "p1") -> dict:
    """A record in the writer's key order (not sorted), with what canonical JSON must sort or escape: nested
    objects, objects inside lists, non-ASCII text, a braces-holding string, NaN, negative zero, big and small
    numbers."""
    return {"record_version": 1, "id": rid, "status": "ok", "error": None,
            "config": {"seed": 3, "policy": "dspark", "load": {"value": 16, "mode": "closed"},
                       "knobs": {"gamma": 7, "drafter": "dspark"}},
            "summary": {"zeta": 1.5, "alpha": float("nan"), "note": "TPS/user ≥ 50 {tier}", "neg": -0.0,
                        "per_domain": [{"z": 1, "a": 2}, {"b": [3, {"d": 4, "c": 5}]}], "big": 10 ** 30,
                        "tiny": 1e-300},
            "requests": {"tps_per_user": [float(i) / 7 for i in range(500)], "output_tokens": list(range(500))},
            "latencies": {"ttft_ms": [1e-5 * i for i in range(500)], "tpot_ms": [0.0] + [12.25] * 499,
                          "e2el_ms": [1e16 + i for i in range(500)]},
            "wall_time_s": 0.25}


def _same(a, b) -> bool:
    """Equal as JSON values, NaN equal to NaN."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch):
    monkeypatch.setattr(record_io, "_memo", {})
    monkeypatch.setattr(record_io, "_memo_bytes", 0)


def test_a_written_record_reads_back_as_json_loads_reads_it_and_without_re_encoding_it(tmp_path, monkeypatch):
    path = write_record(tmp_path, _record())
    # the checksum rebuilt from the text alone: the rule's re-encoding of the whole record is not called
    monkeypatch.setattr(record_io, "body_checksum", lambda rec: pytest.fail("the record was re-encoded"))
    rec = read_record(path)
    assert rec is not None and _same(rec, json.loads(path.read_text()))
    assert list(rec) == list(json.loads(path.read_text()))                  # the writer's key order kept
    assert math.isnan(rec["summary"]["alpha"]) and math.copysign(1, rec["summary"]["neg"]) == -1


@pytest.mark.parametrize("edit", ["a number", "a key", "the order of a list", "the checksum"])
def test_an_altered_record_fails_its_checksum(tmp_path, edit):
    path = write_record(tmp_path, _record())
    text = path.read_text()
    altered = {"a number": text.replace('"output_tokens":[0,1,2', '"output_tokens":[0,1,3'),
               "a key": text.replace('"zeta"', '"zetb"'),
               "the order of a list": text.replace("[0,1,2,", "[1,0,2,"),
               "the checksum": text.replace('"checksum":"', '"checksum":"0')}[edit]
    assert altered != text
    path.write_text(altered)
    assert read_record(path) is None and not record_is_valid(path)
    assert unreadable_records(tmp_path) == [path] and load_records(tmp_path, latest=False) == []


def test_a_record_in_other_json_layout_is_valid_by_the_rule(tmp_path):
    """Indented JSON, sorted keys, spaces: not the writer's compact text, so the rule decides (and holds)."""
    rec = dict(_record(), checksum=body_checksum(_record()))
    path = points_dir(tmp_path) / "p1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec, indent=2, sort_keys=True))
    assert _same(read_record(path), rec) and record_is_valid(path)
    path.write_text(" " + json.dumps(rec) + "\n")
    assert _same(read_record(path), rec)
    path.write_text(json.dumps(rec, separators=(",", ":"), ensure_ascii=False))    # "≥" as itself, not \u2265
    assert _same(read_record(path), rec)
    path.write_text(json.dumps(rec, separators=(",", ":")).replace('"record_version":1', '"record_version":1E0'))
    assert read_record(path) is None                                       # 1E0 reads 1.0: another body


def test_not_json_cut_off_another_id_or_not_an_object_read_as_none(tmp_path):
    path = write_record(tmp_path, _record())
    text = path.read_text()
    for bad in (text[: len(text) // 2], "", "{", "[1, 2]", "null", text + "x", text.replace('"id":"p1"', '"id":"p2"')):
        path.write_text(bad)
        assert read_record(path) is None and not record_is_valid(path), bad[:40]
    (tmp_path / "other.json").write_text(text)                            # p1's record under another name
    assert read_record(tmp_path / "other.json") is None
    assert read_record(tmp_path / "missing.json") is None


def test_a_record_read_again_is_not_parsed_again_and_is_the_reader_s_own(tmp_path, monkeypatch):
    path = write_record(tmp_path, _record())
    first = read_record(path)
    first["summary"]["zeta"] = -1.0                                        # a caller edits its copy
    first["requests"]["output_tokens"].append(7)
    monkeypatch.setattr(record_io, "_parse_checked", lambda *a: pytest.fail("parsed again"))
    again = read_record(path)
    assert again is not first and again["summary"]["zeta"] == 1.5 and len(again["requests"]["output_tokens"]) == 500
    assert record_is_valid(path)


def test_a_file_rewritten_is_read_anew(tmp_path):
    path = write_record(tmp_path, _record())
    assert read_record(path)["status"] == "ok"
    write_record(tmp_path, dict(_record(), status="error"))
    assert read_record(path)["status"] == "error"
    path.write_text(path.read_text().replace('"error"', '"errox"', 1))    # same size, another text
    assert read_record(path) is None


def test_the_memo_keeps_at_most_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(record_io, "MEMO_BYTES", 1)
    paths = [write_record(tmp_path, _record(f"p{i}")) for i in range(3)]
    assert all(read_record(p) is not None for p in paths)
    assert len(record_io._memo) == 1                                       # the latest only
    assert all(read_record(p)["id"] == p.stem for p in paths)


def test_a_record_marshal_cannot_copy_is_read_and_not_remembered(tmp_path, monkeypatch):
    """marshal refuses objects nested deeper than json.loads does under a raised recursion limit: such a record
    reads as ever, and each read parses it."""
    path = write_record(tmp_path, _record())

    def refuse(obj):
        raise ValueError("object too deeply nested to marshal")
    monkeypatch.setattr(record_io.marshal, "dumps", refuse)
    assert read_record(path)["id"] == "p1" and record_is_valid(path) and record_io._memo == {}
