"""Traces: canonical JSONL loading and its errors, public-trace converters, the synthetic generator."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.workload import (LENGTH_MODELS, Trace, convert_azure, convert_mooncake, fit_length_models,
                           load_trace, save_trace, synth_trace, trace_stats,
                           truncated_lognormal_mean)

REPO = Path(__file__).resolve().parent.parent
PROD_ARGS = dict(num_requests=3000, rate=4.0, arrival="gamma", cv=1.5,
                 mix="chat=0.217,code=0.389,math=0.394", seed=2026,
                 max_prompt_tokens=8192, max_output_tokens=2048)  # = traces/README.md command

GOOD = '{"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 3}'


def write(tmp_path: Path, text: str, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def line(**kw) -> str:
    rec = {"arrival_s": 1.0, "prompt_tokens": 10, "output_tokens": 3}
    rec.update(kw)
    return json.dumps({k: v for k, v in rec.items() if v is not ...})


# ----------------------------------------------------------------------------------- loading


def test_load_defaults_bursts_and_blank_lines(tmp_path):
    text = "\n".join([line(arrival_s=0), "", line(arrival_s=1.5, domain="math"),
                      line(arrival_s=1.5, request_id="x"), "   "]) + "\n"
    t = load_trace(write(tmp_path, text))
    assert len(t) == 3
    assert t.arrival_s.tolist() == [0.0, 1.5, 1.5]  # equal arrivals are a valid burst
    assert t.request_id.tolist() == ["0", "1", "x"]  # default = request index
    assert t.domain.tolist() == ["chat", "math", "chat"]
    assert t.arrival_s.dtype == np.float64 and t.prompt_tokens.dtype == np.int64
    assert not t.arrival_s.flags.writeable
    assert t.source == str(tmp_path / "t.jsonl")


def test_id_field_used_when_request_id_absent(tmp_path):
    t = load_trace(write(tmp_path, line(id=7) + "\n" + line(id="b", request_id="c") + "\n"))
    assert t.request_id.tolist() == ["7", "c"]


BAD_CASES = [
    # (lines, bad line (1-based), field, fragment of the message)
    ([GOOD, GOOD, '{"arrival_s": 1, "prompt_tokens": 5,'], 3, None, "malformed JSON"),
    ([GOOD, "[1, 2]"], 2, None, "expected a JSON object"),
    ([line(arrival_s=2.0), line(arrival_s=2.0), line(arrival_s=1.999)], 3, "arrival_s",
     "the arrival on line 2"),
    ([line(request_id="a"), line(), line(request_id="a")], 3, "request_id", "already used on line 1"),
    ([line(), line(request_id="0")], 2, "request_id", "'0', already used on line 1"),  # default id
    ([line(), line(request_id=True)], 2, "request_id", "true (a boolean)"),
    ([line(), line(request_id="")], 2, "request_id", "non-empty"),
    ([line(), '{"arrival_s": NaN, "prompt_tokens": 1, "output_tokens": 1}'], 2, "arrival_s", "NaN"),
    (['{"arrival_s": Infinity, "prompt_tokens": 1, "output_tokens": 1}'], 1, "arrival_s",
     "Infinity"),
    ([line(), line(), '{"arrival_s": 1e999, "prompt_tokens": 1, "output_tokens": 1}'], 3,
     "arrival_s", "inf"),
    ([line(), line(prompt_tokens=...)], 2, "prompt_tokens", "field missing"),
    ([line(arrival_s=...)], 1, "arrival_s", "field missing"),
    ([line(), line(output_tokens=True)], 2, "output_tokens", "true (a boolean)"),
    ([line(), line(), line(), line(arrival_s="1.0")], 4, "arrival_s", '"1.0" (a string)'),
    ([line(arrival_s=False)], 1, "arrival_s", "(a boolean)"),
    ([line(), line(prompt_tokens=5.0)], 2, "prompt_tokens", "5.0 (a float)"),
    ([line(), line(prompt_tokens="5")], 2, "prompt_tokens", "(a string)"),
    ([line(), line(output_tokens=0)], 2, "output_tokens", "got 0"),
    ([line(prompt_tokens=-3)], 1, "prompt_tokens", "got -3"),
    ([line(arrival_s=-0.5)], 1, "arrival_s", "-0.5"),
    ([line(), line(domain=3)], 2, "domain", "3 (an int)"),
    ([line(), line(prompt_tokens=None)], 2, "prompt_tokens", "null"),
]


@pytest.mark.parametrize("lines,bad_line,field,fragment", BAD_CASES)
def test_bad_input_names_file_line_field(tmp_path, lines, bad_line, field, fragment):
    p = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(p)
    e = ei.value
    assert (e.file, e.line, e.field) == (str(p), bad_line, field)
    assert fragment in str(e)
    assert e.expected


def test_bad_line_number_counts_blank_lines(tmp_path):
    p = write(tmp_path, "\n".join([line(), "", "", line(), line(output_tokens=-1)]))
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(p)
    assert (ei.value.line, ei.value.field) == (5, "output_tokens")


@pytest.mark.parametrize("text,got", [("", "an empty file"), ("\n  \n\n", "only blank lines")])
def test_empty_trace(tmp_path, text, got):
    p = write(tmp_path, text)
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(p)
    assert ei.value.file == str(p) and ei.value.line >= 1 and ei.value.got == got


def test_missing_file_and_bad_utf8(tmp_path):
    with pytest.raises(SpecsimInputError, match="readable file"):
        load_trace(tmp_path / "absent.jsonl")
    p = tmp_path / "b.jsonl"
    p.write_bytes(GOOD.encode() + b'\n{"arrival_s": 1, "domain": "\xff"}\n')
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(p)
    assert ei.value.line == 2


def test_vidur_workload_loads(shared):
    t = load_trace(shared / "anchors" / "vidur_run" / "workload.jsonl")
    assert len(t) == 300
    assert t.request_id[:3].tolist() == ["0", "1", "2"]
    assert t.arrival_s[0] == 0.51003 and t.prompt_tokens[0] == 395 and t.output_tokens[0] == 112


# ---------------------------------------------------------------------- Trace, save, round trip


def make_trace(ids=("a\"b", "é", "3")) -> Trace:
    return Trace(np.array(ids, dtype=object), [0.0, 0.1 + 0.2, 0.30000000000000004 * 3],
                 [1, 20, 300], [5, 6, 7], ["chat", "code", "math"], source="mem")


def test_round_trip_exact(tmp_path):
    t = make_trace()
    save_trace(t, tmp_path / "r.jsonl")
    u = load_trace(tmp_path / "r.jsonl")
    assert u.content_hash() == t.content_hash()
    assert u.arrival_s.tolist() == t.arrival_s.tolist()  # bit-exact floats
    assert u.request_id.tolist() == ['a"b', "é", "3"]


def test_save_omits_default_ids(tmp_path):
    t = make_trace(ids=("0", "1", "2"))
    save_trace(t, tmp_path / "d.jsonl")
    first = json.loads((tmp_path / "d.jsonl").read_text().splitlines()[0])
    assert "request_id" not in first
    assert load_trace(tmp_path / "d.jsonl").content_hash() == t.content_hash()


def test_content_hash_depends_on_content_only():
    t = make_trace()
    assert len(t.content_hash()) == 64
    same = Trace(t.request_id, t.arrival_s, t.prompt_tokens, t.output_tokens, t.domain, source="x")
    assert same.content_hash() == t.content_hash()
    other = Trace(t.request_id, t.arrival_s, [1, 20, 301], t.output_tokens, t.domain)
    assert other.content_hash() != t.content_hash()


def test_head_and_frame():
    t = make_trace()
    h = t.head(2)
    assert len(h) == 2 and h.prompt_tokens.tolist() == [1, 20]
    df = t.to_frame()
    assert list(df.columns) == ["request_id", "arrival_s", "prompt_tokens", "output_tokens",
                                "domain"]
    assert df["output_tokens"].sum() == 18
    with pytest.raises(SpecsimInputError):
        t.head(0)


def test_trace_constructor_validates():
    with pytest.raises(SpecsimInputError) as ei:
        Trace(["a", "b"], [1.0, 0.5], [1, 1], [1, 1], ["chat", "chat"], source="mem")
    assert (ei.value.line, ei.value.field) == (2, "arrival_s")
    with pytest.raises(SpecsimInputError, match="request_id"):
        Trace(["a", "a"], [0.0, 0.5], [1, 1], [1, 1], ["chat", "chat"])
    with pytest.raises(SpecsimInputError, match="length 2"):
        Trace(["a", "b"], [0.0, 0.5], [1], [1, 1], ["chat", "chat"])
    # a fractional token count was cut to its whole part silently (the JSONL loader refuses it)
    with pytest.raises(SpecsimInputError) as ei:
        Trace(["a", "b"], [0.0, 0.5], [1, 1], [50, 50.2], ["chat", "chat"])
    assert (ei.value.line, ei.value.field, ei.value.got) == (2, "output_tokens", "50.2")
    assert Trace(["a"], [0.0], [100.0], [np.float32(7)], ["chat"]).prompt_tokens.tolist() == [100]


# --------------------------------------------------------------------- prefix information

SHARED_PREFIX = REPO / "tests" / "data" / "shared_prefix.jsonl"
GROUP_TOKENS = {"sys-a": 256, "sys-b": 512, "sys-c": 1000}


def test_load_defaults_have_no_prefix_info(tmp_path):
    t = load_trace(write(tmp_path, GOOD + "\n" + GOOD + "\n"))
    assert t.hash_ids == (None, None) and not t.has_prefix_info
    assert t.hash_block_tokens.tolist() == [0, 0] and t.hash_block_tokens.dtype == np.int64
    assert t.prefix_group.tolist() == [None, None] and t.prefix_group.dtype == object
    assert t.prefix_tokens.tolist() == [0, 0] and t.prefix_tokens.dtype == np.int64
    assert not t.prefix_tokens.flags.writeable and not t.prefix_group.flags.writeable


def test_shared_prefix_file_parses():
    t = load_trace(SHARED_PREFIX)
    assert len(t) == 16 and t.has_prefix_info
    grouped = [g is not None for g in t.prefix_group]
    hashed = [h is not None for h in t.hash_ids]
    assert sum(grouped) == 12 and sum(hashed) == 2
    assert sum(not (g or h) for g, h in zip(grouped, hashed)) == 2          # 2 without prefix
    assert not any(g and h for g, h in zip(grouped, hashed))
    for g, k in GROUP_TOKENS.items():
        rows = t.prefix_group == g
        assert rows.sum() == 4 and set(t.prefix_tokens[rows].tolist()) == {k}
        assert np.all(t.prompt_tokens[rows] > k)                               # a user part follows
    assert t.prefix_tokens[~np.array(grouped)].tolist() == [0] * 4
    i = t.request_id.tolist().index("hash1")
    assert t.hash_ids[i] == (100, 101, 102) and t.hash_block_tokens[i] == 512
    assert t.hash_block_tokens.tolist().count(512) == 2 and t.hash_block_tokens.sum() == 1024
    assert int(t.prompt_tokens.sum()) == 12924  # tests/data/README.md


def _cached_tokens(t: Trace, kv_block: int = 16) -> int:
    """Prompt tokens an unbounded cache of full ``kv_block``-token blocks holds when each request
    arrives after the previous one has been prefilled (the tests/data/README.md figure)."""
    seen: set = set()
    hit = 0
    for i in range(len(t)):
        if t.prefix_group[i] is not None:
            keys = [("group", t.prefix_group[i], b) for b in range(t.prefix_tokens[i] // kv_block)]
        elif t.hash_ids[i] is not None:
            full = t.prompt_tokens[i] // t.hash_block_tokens[i]                # trailing partial: never
            per = t.hash_block_tokens[i] // kv_block
            keys = [("hash", t.hash_ids[i][:j + 1], b) for j in range(full) for b in range(per)]
        else:
            keys = []
        hit += kv_block * sum(k in seen for k in keys)
        seen.update(keys)
    return hit


def test_shared_prefix_hand_computed_hits():
    t = load_trace(SHARED_PREFIX)
    assert _cached_tokens(t) == 3 * 256 + 3 * 512 + 3 * 992 + 1024 == 6304
    assert 6304 / 12924 == pytest.approx(0.4878, abs=5e-5)


def test_shared_prefix_round_trip_bytes_and_head(tmp_path):
    t = load_trace(SHARED_PREFIX)
    save_trace(t, tmp_path / "s.jsonl")
    assert (tmp_path / "s.jsonl").read_bytes() == SHARED_PREFIX.read_bytes()
    u = load_trace(tmp_path / "s.jsonl")
    assert u.content_hash() == t.content_hash()
    assert u.hash_ids == t.hash_ids and u.prefix_group.tolist() == t.prefix_group.tolist()
    h = t.head(8)                                         # rows 0..7: 6 grouped, 1 plain, 1 hashed
    assert h.prefix_group.tolist() == t.prefix_group[:8].tolist()
    assert h.prefix_tokens.tolist() == [256, 512, 1000] * 2 + [0, 0]
    assert h.hash_ids == (None,) * 7 + ((100, 101, 102),)
    assert h.hash_block_tokens.tolist() == [0] * 7 + [512]
    save_trace(h, tmp_path / "h.jsonl")
    lines = (tmp_path / "h.jsonl").read_text().splitlines()
    assert [json.loads(x).keys() & {"hash_ids", "hash_block_tokens", "prefix_group", "prefix_tokens"}
            for x in lines[6:]] == [set(), {"hash_ids", "hash_block_tokens"}]  # only where present
    df = t.to_frame()
    assert list(df.columns)[5:] == ["hash_ids", "hash_block_tokens", "prefix_group", "prefix_tokens"]
    assert df["prefix_tokens"].sum() == 4 * (256 + 512 + 1000)


def test_content_hash_covers_prefix_info_and_keeps_old_hashes():
    t = make_trace()
    # A trace without prefix information hashes as before the prefix columns existed.
    h = hashlib.sha256(b"specsim-trace-v1\n")
    h.update(b"3")
    h.update(t.arrival_s.astype("<f8").tobytes())
    h.update(t.prompt_tokens.astype("<i8").tobytes())
    h.update(t.output_tokens.astype("<i8").tobytes())
    h.update(json.dumps(t.request_id.tolist(), separators=(",", ":")).encode())
    h.update(json.dumps(t.domain.tolist(), separators=(",", ":")).encode())
    assert t.content_hash() == h.hexdigest()
    base = dict(request_id=t.request_id, arrival_s=t.arrival_s, prompt_tokens=t.prompt_tokens,
                output_tokens=t.output_tokens, domain=t.domain)
    group = Trace(**base, prefix_group=[None, "s", "s"], prefix_tokens=[0, 10, 10])
    hashed = Trace(**base, hash_ids=[None, (7, 8), None], hash_block_tokens=[0, 16, 0])
    hashed2 = Trace(**base, hash_ids=[None, (7, 9), None], hash_block_tokens=[0, 16, 0])
    hashes = {x.content_hash() for x in (t, group, hashed, hashed2)}
    assert len(hashes) == 4
    assert Trace(**base, hash_ids=[None, [7, 8], None], hash_block_tokens=np.array([0, 16, 0])
                 ).content_hash() == hashed.content_hash()


def test_prefix_boundaries_are_valid(tmp_path):
    t = load_trace(write(tmp_path, "\n".join([
        line(prompt_tokens=1024, hash_ids=[1, 2], hash_block_tokens=512),       # exact multiple
        line(prompt_tokens=1025, hash_ids=[1, 2, 3], hash_block_tokens=512),    # 1-token tail block
        line(prompt_tokens=40, prefix_group="g", prefix_tokens=40),             # whole prompt shared
        line(prompt_tokens=41, prefix_group="g", prefix_tokens=40),
        line(prompt_tokens=1, hash_ids=[-(2**63)], hash_block_tokens=512),      # int64 range
    ])))
    assert t.hash_ids == ((1, 2), (1, 2, 3), None, None, (-(2**63),))
    assert t.prefix_tokens.tolist() == [0, 0, 40, 40, 0]


BAD_PREFIX_CASES = [
    ([line(), line(hash_ids=[1], hash_block_tokens=16, prefix_group="g", prefix_tokens=5)], 2,
     "prefix_group", "not both"),
    ([line(prefix_group="g", prefix_tokens=11)], 1, "prefix_tokens", "[1, prompt_tokens = 10]"),
    ([line(prefix_group="g", prefix_tokens=0)], 1, "prefix_tokens", "got 0"),
    ([line(prefix_group="g", prefix_tokens=True)], 1, "prefix_tokens", "(a boolean)"),
    ([line(prefix_group="g")], 1, "prefix_tokens", "field missing"),
    ([line(prefix_tokens=5)], 1, "prefix_tokens", "prefix_tokens without prefix_group"),
    ([line(prefix_group="", prefix_tokens=5)], 1, "prefix_group", "non-empty string"),
    ([line(prefix_group=3, prefix_tokens=5)], 1, "prefix_group", "3 (an int)"),
    ([line(prefix_group="g", prefix_tokens=5), line(prefix_group="h", prefix_tokens=6),
      line(prefix_group="g", prefix_tokens=6)], 3, "prefix_tokens", "of group 'g' on line 1"),
    ([line(prompt_tokens=1025, hash_ids=[1, 2], hash_block_tokens=512)], 1, "hash_ids",
     "expected 3 ids (ceil of 1025 prompt tokens / 512 per id), got 2 ids"),           # too short
    ([line(prompt_tokens=1024, hash_ids=[1, 2, 3], hash_block_tokens=512)], 1, "hash_ids",
     "got 3 ids"),                                                                        # too long
    ([line(hash_ids=[], hash_block_tokens=16)], 1, "hash_ids", "an empty list"),
    ([line(hash_ids=7, hash_block_tokens=16)], 1, "hash_ids", "7 (an int)"),
    ([line(hash_ids=[True], hash_block_tokens=16)], 1, "hash_ids", "true (a boolean) at index 0"),
    ([line(prompt_tokens=20, hash_ids=[1, 2.0], hash_block_tokens=16)], 1, "hash_ids",
     "2.0 (a float) at index 1"),
    ([line(hash_ids=[2**63], hash_block_tokens=16)], 1, "hash_ids", "int64 range"),
    ([line(hash_ids=[1])], 1, "hash_block_tokens", "field missing"),
    ([line(hash_ids=[1], hash_block_tokens=0)], 1, "hash_block_tokens", "got 0"),
    ([line(hash_block_tokens=16)], 1, "hash_block_tokens", "without hash_ids"),
    ([line(hash_ids=[1], hash_block_tokens=16), line(), line(hash_ids=[1], hash_block_tokens=32)],
     3, "hash_block_tokens", "16, as on line 1"),
]


@pytest.mark.parametrize("lines,bad_line,field,fragment", BAD_PREFIX_CASES)
def test_bad_prefix_fields_name_file_line_field(tmp_path, lines, bad_line, field, fragment):
    p = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(p)
    assert (ei.value.file, ei.value.line, ei.value.field) == (str(p), bad_line, field)
    assert fragment in str(ei.value)


@pytest.mark.parametrize("kw,pos,field", [
    (dict(hash_ids=[(1,), None], hash_block_tokens=[16, 0], prefix_group=["g", None],
          prefix_tokens=[5, 0]), 1, "prefix_group"),                                  # both kinds
    (dict(prefix_group=[None, "g"], prefix_tokens=[0, 11]), 2, "prefix_tokens"),     # > prompt
    (dict(prefix_group=[None, "g"]), 2, "prefix_tokens"),                             # tokens 0
    (dict(prefix_tokens=[3, 0]), 1, "prefix_tokens"),                                 # no group
    (dict(prefix_group=["", None], prefix_tokens=[3, 0]), 1, "prefix_group"),
    (dict(prefix_group=["g", "g"], prefix_tokens=[3, 4]), 2, "prefix_tokens"),        # one per group
    (dict(hash_ids=[None, (1,)]), 2, "hash_block_tokens"),                            # block missing
    (dict(hash_block_tokens=[16, 0]), 1, "hash_block_tokens"),                        # no hash_ids
    (dict(hash_ids=[(1,), (1, 2)], hash_block_tokens=[16, 8]), 2, "hash_block_tokens"),
    (dict(hash_ids=[(1,), (1, 2)], hash_block_tokens=[16, 16]), 2, "hash_ids"),       # too long
    (dict(hash_ids=[(1,), (1,)], hash_block_tokens=[4, 4]), 1, "hash_ids"),           # too short
    (dict(hash_ids=[(1,), (1.5,)], hash_block_tokens=[16, 16]), 2, "hash_ids"),       # not ints
    (dict(hash_ids=[(1,), ()], hash_block_tokens=[16, 16]), 2, "hash_ids"),           # empty
])
def test_trace_constructor_validates_prefix_columns(kw, pos, field):
    with pytest.raises(SpecsimInputError) as ei:
        Trace(["a", "b"], [0.0, 0.5], [10, 10], [1, 1], ["chat", "chat"], source="mem", **kw)
    assert (ei.value.file, ei.value.line, ei.value.field) == ("mem", pos, field)


def test_trace_constructor_prefix_lengths():
    with pytest.raises(SpecsimInputError, match="length 2"):
        Trace(["a", "b"], [0.0, 0.5], [1, 1], [1, 1], ["chat", "chat"], hash_ids=[None])
    with pytest.raises(SpecsimInputError, match="length 2"):
        Trace(["a", "b"], [0.0, 0.5], [1, 1], [1, 1], ["chat", "chat"], prefix_tokens=[0])


# ------------------------------------------------------------------------------- converters


def _wall_ns(stamp: str) -> int:
    """'YYYY-MM-DD HH:MM:SS.fffffff' -> ns since that day's midnight (same-day traces)."""
    hms, frac = stamp.split(" ")[1].split(".")
    h, m, s = (int(v) for v in hms.split(":"))
    return ((h * 60 + m) * 60 + s) * 10**9 + int(frac) * 100


@pytest.mark.parametrize("name,rows,domain,cv", [("code", 8819, "code", 13.15),
                                                 ("conv", 19366, "chat", 1.094)])
def test_azure_real(shared, name, rows, domain, cv):
    path = shared / "data/traces/azure_llm_2023" / f"AzureLLMInferenceTrace_{name}.csv"
    t = convert_azure(path)
    lines = path.read_text().splitlines()
    first, last = lines[1].split(",")[0], lines[-1].split(",")[0]
    assert len(t) == rows == len(lines) - 1
    assert t.arrival_s[0] == 0.0
    assert t.arrival_s[-1] == (_wall_ns(last) - _wall_ns(first)) / 1e9  # exact, 100 ns ticks
    assert round(t.arrival_s[-1]) == {"code": 3436, "conv": 3502}[name]  # SOURCES.md 1a
    st = trace_stats(t)
    assert st["domains"]["all"]["prompt_mean"] == pytest.approx(
        {"code": 2048, "conv": 1155}[name], abs=1)
    assert st["interarrival_cv"] == pytest.approx(cv, abs=0.01)
    assert set(t.domain) == {domain}
    assert set(convert_azure(path, domain="math").domain) == {"math"}


AZ_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZ_OK = "2023-11-16 18:17:03.9799600,10,2\n"


@pytest.mark.parametrize("body,bad_line,field", [
    (AZ_OK + "2023-11-16 18:17:04.5 UTC,10,2\n", 3, "TIMESTAMP"),
    (AZ_OK + AZ_OK + "2023-11-16 18:17:03.9799599,10,2\n", 4, "TIMESTAMP"),
    (AZ_OK + "2023-11-16 18:17:04.0000000,abc,2\n", 3, "ContextTokens"),
    (AZ_OK + "2023-11-16 18:17:04.0000000,12.5,2\n", 3, "ContextTokens"),
    (AZ_OK + AZ_OK + "2023-11-16 18:17:04.0000000,10,0\n", 4, "GeneratedTokens"),
    (AZ_OK + "2023-11-16 18:17:04.0000000,10,\n", 3, "GeneratedTokens"),
    (AZ_OK + "\n\n" + "2023-11-16 18:17:04.0000000,abc,2\n", 5, "ContextTokens"),     # blank lines counted
])
def test_azure_bad_rows(tmp_path, body, bad_line, field):
    p = write(tmp_path, AZ_HEAD + body, "x_code.csv")
    with pytest.raises(SpecsimInputError) as ei:
        convert_azure(p)
    assert (ei.value.file, ei.value.line, ei.value.field) == (str(p), bad_line, field)


def test_blank_lines_are_skipped_and_counted_by_every_csv_converter(tmp_path):
    # a trailing blank line (an editor's) is skipped, not a bad TIMESTAMP; a bad row after blank lines is named by
    # its own file line (the table and BurstGPT readers counted only the rows they kept)
    from specsim.workload.converters import convert_burstgpt, convert_table

    assert len(convert_azure(write(tmp_path, AZ_HEAD + AZ_OK + "\n\n", "az_code.csv"))) == 1
    with pytest.raises(SpecsimInputError) as ei:
        convert_table(write(tmp_path, "ts,in,out\n1,297,500\n\n2,300,abc\n", "t.csv"),
                      "arrival_s=ts,prompt_tokens=in,output_tokens=out")
    assert (ei.value.line, ei.value.field) == (4, "out")
    head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    with pytest.raises(SpecsimInputError) as ei:
        convert_burstgpt(write(tmp_path, head + "1,ChatGPT,10,20,30,Conversation log\n\n\n"
                               "2,ChatGPT,x,20,30,Conversation log\n", "b.csv"))
    assert (ei.value.line, ei.value.field) == (5, "Request tokens")


def test_table_ids_and_arrivals_are_checked_where_the_file_says_them(tmp_path):
    # a JSONL row without its id is named (pandas made the others 17.0 and this one 'nan'); integer ids stay
    # integers; an arrival beyond specsim's time bound is refused at conversion, not by the trace it writes
    from specsim.workload.converters import convert_table

    cmap = "arrival_s=t,prompt_tokens=p,output_tokens=o,request_id=id"
    gap = write(tmp_path, '{"t":1,"p":5,"o":3,"id":17}\n{"t":2,"p":6,"o":4}\n{"t":3,"p":7,"o":5,"id":18}\n', "g.jsonl")
    with pytest.raises(SpecsimInputError) as ei:
        convert_table(gap, cmap)
    assert (ei.value.line, ei.value.field, ei.value.got) == (2, "id", "none")
    ok = write(tmp_path, '{"t":1,"p":5,"o":3,"id":17}\n{"t":2,"p":6,"o":4,"id":"a"}\n', "k.jsonl")
    assert convert_table(ok, cmap).request_id.tolist() == ["17", "a"]
    unix = write(tmp_path, "ts,in,out\n1764547200803,297,500\n1764547201245,300,20\n", "u.csv")
    with pytest.raises(SpecsimInputError, match="--origin first") as ei:
        convert_table(unix, "arrival_s=ts,prompt_tokens=in,output_tokens=out", time_unit="ms", origin="zero")
    assert ei.value.line == 2
    assert convert_table(unix, "arrival_s=ts,prompt_tokens=in,output_tokens=out", time_unit="ms").arrival_s[
        1] == pytest.approx(0.442)


def test_the_first_requests_of_a_long_trace_are_read_alone(tmp_path):
    # run --num-requests N reads N + 1 lines of the file (a million-line trace took 13.6 s for 200 requests): the
    # rest is neither parsed nor checked, the head is the one the whole file gives
    lines = [json.dumps({"arrival_s": float(i), "prompt_tokens": 10, "output_tokens": 5}) for i in range(6)]
    p = write(tmp_path, "\n".join(lines + ["{broken"]) + "\n", "long.jsonl")
    with pytest.raises(SpecsimInputError):
        load_trace(p)
    short = load_trace(p, max_requests=4)
    assert len(short) == 4 and short.head(3).content_hash() == load_trace(
        write(tmp_path, "\n".join(lines[:3]) + "\n", "three.jsonl")).head(3).content_hash()


def test_table_datetimes_mixing_zoned_and_naive_are_refused(tmp_path):
    # a naive time beside zoned ones was read as UTC without a word (the Azure reader refuses the same mix);
    # different offsets share a clock and convert
    from specsim.workload.converters import convert_table

    cmap = "arrival_s=ts,prompt_tokens=in,output_tokens=out"
    mixed = write(tmp_path, "ts,in,out\n2024-03-01T00:00:01Z,10,5\n2024-03-01 00:00:00.5,10,5\n", "m.csv")
    with pytest.raises(SpecsimInputError, match="no common clock") as ei:
        convert_table(mixed, cmap, time_unit="datetime")
    assert ei.value.line == 3
    zones = write(tmp_path, "ts,in,out\n2024-03-01T00:00:00.5+01:00,10,5\n2024-03-01T00:00:01Z,10,5\n", "z.csv")
    assert convert_table(zones, cmap, time_unit="datetime").arrival_s.tolist() == [0.0, 3600.5]


def test_azure_small_exact(tmp_path):
    p = write(tmp_path, AZ_HEAD + AZ_OK + "2023-11-16 18:17:05.0000001,7,3\n", "mycode.csv")
    t = convert_azure(p)
    assert t.arrival_s.tolist() == [0.0, 1.0200401]
    assert t.domain.tolist() == ["code", "code"]
    with pytest.raises(SpecsimInputError) as ei:
        convert_azure(write(tmp_path, "TIMESTAMP,Context\n" + AZ_OK, "c.csv"))
    assert (ei.value.line, ei.value.field) == (1, "ContextTokens")


def mooncake_file(tmp_path, stamps) -> Path:
    rows = [json.dumps({"timestamp": s, "input_length": 100 + i, "output_length": 10,
                        "hash_ids": [i]}) for i, s in enumerate(stamps)]
    return write(tmp_path, "\n".join(rows) + "\n", "mc.jsonl")

DATA = Path(__file__).resolve().parent / "data"


def test_azure_iso_offsets_case():
    # tests/data/azure_iso_tz.csv: 'T', 'Z', '+01:00'; 01:00:01+01:00 is 00:00:01Z
    t = convert_azure(DATA / "azure_iso_tz.csv")
    assert t.arrival_s.tolist() == [0.0, 0.5, 1.75]
    assert t.prompt_tokens.tolist() == [100, 200, 300]


def test_azure_mixed_zones_refused():
    with pytest.raises(SpecsimInputError) as ei:
        convert_azure(DATA / "azure_mixed_tz.csv")
    e = ei.value
    assert (e.line, e.field) == (3, "TIMESTAMP")
    assert "mixes zone-aware and naive" in str(e)


@pytest.mark.parametrize("stamps,arrivals", [
    # naive ISO, no fraction, a space or a 'T', a 9+ digit fraction (digits past ns dropped)
    (["2024-03-01T00:00:00", "2024-03-01 00:00:01", "2024-03-01T00:00:01.123456789999"],
     [0.0, 1.0, 1.123456789]),
    (["2024-03-01T00:00", "2024-03-01t00:01:00,25"], [0.0, 60.25]),   # no seconds; comma fraction
    # every zone form: Z, z, +HH:MM, +HHMM, +HH, -HH:MM; all the same instant plus 1 s steps
    (["2024-03-01T00:00:00Z", "2024-03-01T01:00:01+01:00", "2024-03-01T01:00:02+0100",
      "2024-03-01T02:00:03+02", "2024-02-29T19:30:04-04:30", "2024-03-01 00:00:05z"],
     [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
    (["2023-12-31T23:59:59.9999999", "2024-01-01T00:00:00.0000001"], [0.0, 2e-7]),  # year boundary
    (["2024-02-28 23:59:59", "2024-02-29 00:00:00", "2024-03-01 00:00:00"], [0.0, 1.0, 86401.0]),
])
def test_azure_time_forms(tmp_path, stamps, arrivals):
    p = write(tmp_path, AZ_HEAD + "".join(f'"{s}",10,2\n' for s in stamps), "t.csv")
    assert convert_azure(p).arrival_s.tolist() == arrivals


@pytest.mark.parametrize("bad", ["2023-02-29 00:00:00", "2024-13-01 00:00:00", "2024-03-01 24:00:00",
                                 "2024-03-01 00:60:00", "2024-03-01 00:00:60", "2024-03-01T00:00:00+24:00",
                                 "2024-03-01", "1709251200", "2024-03-01 00:00:00 UTC",
                                 "\u0662024-03-01 00:00:00"])
def test_azure_time_bad_values(tmp_path, bad):
    p = write(tmp_path, AZ_HEAD + AZ_OK.replace("2023-11-16", "2023-11-15") + f"{bad},10,2\n", "t.csv")
    with pytest.raises(SpecsimInputError) as ei:
        convert_azure(p)
    assert (ei.value.line, ei.value.field) == (3, "TIMESTAMP")


def test_mooncake_fractional_ms(tmp_path):
    p = mooncake_file(tmp_path, [0, 1500.25, 3000])
    assert convert_mooncake(p).arrival_s.tolist() == [0.0, 1.50025, 3.0]



def test_mooncake_burst_and_spread(tmp_path):
    # slots at 500, 1500, 4500 ms: gaps 1000 and 3000, median 2000 for the last slot
    p = mooncake_file(tmp_path, [500, 500, 500, 1500, 1500, 4500, 4500])
    burst = convert_mooncake(p, slots="burst")
    assert burst.arrival_s.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 4.0, 4.0]
    spread = convert_mooncake(p, slots="spread")
    assert spread.arrival_s.tolist() == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0, 2.5, 4.0, 5.0],
                                                      abs=1e-12)
    assert spread.prompt_tokens.tolist() == list(range(100, 107))  # order kept
    assert convert_mooncake(p, slots="spread").content_hash() == spread.content_hash()
    assert burst.hash_ids == spread.hash_ids == tuple((i,) for i in range(7))  # kept, in order
    assert burst.hash_block_tokens.tolist() == [512] * 7  # SOURCES.md 1b: 512-token blocks
    assert burst.prefix_group.tolist() == [None] * 7
    one = convert_mooncake(mooncake_file(tmp_path, [7, 7, 7]), slots="spread")
    assert one.arrival_s.tolist() == [0.0, 0.0, 0.0]  # a single slot has no width
    with pytest.raises(SpecsimInputError, match="slots"):
        convert_mooncake(p, slots="uniform")


@pytest.mark.parametrize("rows,bad_line,field", [
    (['{"timestamp": 0, "input_length": 5, "output_length": 1}',
      '{"timestamp": 3000, "input_length": 5}'], 2, "output_length"),
    (['{"timestamp": 3000, "input_length": 5, "output_length": 1}',
      '{"timestamp": 0, "input_length": 5, "output_length": 1}'], 2, "timestamp"),
    (['{"timestamp": -1.5, "input_length": 5, "output_length": 1}'], 1, "timestamp"),
    (['{"timestamp": true, "input_length": 5, "output_length": 1}'], 1, "timestamp"),
    (['{"timestamp": NaN, "input_length": 5, "output_length": 1}'], 1, "timestamp"),
    (['{"timestamp": 9007199254740993, "input_length": 5, "output_length": 1}'], 1, "timestamp"),
    (['{"timestamp": 0, "input_length": 18446744073709551616, "output_length": 1}'], 1, "input_length"),
    (['{"timestamp": 0, "input_length": 0, "output_length": 1}'], 1, "input_length"),
    (['{"timestamp": 0, "input_length": 5, "output_length": 1}', '{"timestamp": 0,'], 2, None),
    (['{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}',
      '{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1]}'], 2, "hash_ids"),
    (['{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "1"}'], 1, "hash_ids"),
])
def test_mooncake_bad_rows(tmp_path, rows, bad_line, field):
    p = write(tmp_path, "\n".join(rows) + "\n")
    with pytest.raises(SpecsimInputError) as ei:
        convert_mooncake(p)
    assert (ei.value.file, ei.value.line, ei.value.field) == (str(p), bad_line, field)


def test_mooncake_real(shared):
    path = shared / "data/traces/mooncake_fast25/conversation_trace.jsonl"
    burst = convert_mooncake(path, slots="burst")
    spread = convert_mooncake(path, slots="spread")
    assert len(burst) == len(spread) == 12031  # SOURCES.md 1b
    assert burst.arrival_s[-1] == 3536.999  # 0 to 3,536,999 ms
    assert len(np.unique(burst.arrival_s)) == 1180
    assert len(np.unique(spread.arrival_s)) > 11000
    # every spread arrival stays inside its slot: [slot start, slot start + width)
    assert np.all(spread.arrival_s >= burst.arrival_s)
    starts = np.unique(burst.arrival_s)  # (1180,) slot starts
    slot = np.searchsorted(starts, burst.arrival_s)
    inner = slot < starts.size - 1
    assert np.all(spread.arrival_s[inner] < starts[slot[inner] + 1])
    assert 3536.999 < spread.arrival_s[-1] < 3540.0
    assert trace_stats(burst)["rate_req_per_s"] == pytest.approx(3.40, abs=0.005)
    assert set(burst.domain) == {"chat"}


def test_mooncake_real_keeps_hash_ids(shared, tmp_path):
    path = shared / "data/traces/mooncake_fast25/conversation_trace.jsonl"
    t = convert_mooncake(path)
    assert t.hash_ids[0] == tuple(range(14)) and t.hash_ids[1] == (0, *range(14, 28))
    assert t.hash_block_tokens.tolist() == [512] * 12031
    count = np.array([len(h) for h in t.hash_ids])                                # (N,)
    assert np.array_equal(count, -(-t.prompt_tokens // 512))                     # ceil(prompt / 512)
    seen: set = set()
    reused = 0
    for h in t.hash_ids:
        reused += sum(x in seen for x in h)
        seen.update(h)
    assert reused / count.sum() == pytest.approx(0.366, abs=5e-4)  # SOURCES.md 1b: 36.6% reused
    save_trace(t, tmp_path / "m.jsonl")
    u = load_trace(tmp_path / "m.jsonl")
    assert u.content_hash() == t.content_hash() and u.hash_ids == t.hash_ids


# ------------------------------------------------------------------------------- synthetic


def test_synth_reproducible():
    a = synth_trace(500, 2.0, arrival="gamma", cv=2.0, mix="chat=1,math=1", seed=7)
    b = synth_trace(500, 2.0, arrival="gamma", cv=2.0, mix="chat=1,math=1", seed=7)
    c = synth_trace(500, 2.0, arrival="gamma", cv=2.0, mix="chat=1,math=1", seed=8)
    assert a.content_hash() == b.content_hash() != c.content_hash()
    assert a.arrival_s[0] == 0.0
    assert np.all(a.arrival_s == np.round(a.arrival_s, 6))


@pytest.mark.parametrize("arrival,cv", [("poisson", 1.0), ("gamma", 1.5), ("gamma", 0.5)])
def test_synth_rate_cv(arrival, cv):
    t = synth_trace(100_000, 4.0, arrival=arrival, cv=cv, seed=3)
    st = trace_stats(t)
    assert st["rate_req_per_s"] == pytest.approx(4.0, rel=0.02)
    assert st["interarrival_cv"] == pytest.approx(cv, rel=0.03)


def test_synth_lengths_match_models():
    t = synth_trace(150_000, 10.0, mix="chat=1,code=1,math=1", seed=11,
                    max_prompt_tokens=8192, max_output_tokens=2048)
    assert t.prompt_tokens.min() >= 1 and t.prompt_tokens.max() <= 8192
    assert t.output_tokens.min() >= 1 and t.output_tokens.max() <= 2048
    for d, m in LENGTH_MODELS.items():
        k = t.domain == d
        assert k.sum() == 50_000  # exact largest-remainder counts
        p, o = t.prompt_tokens[k], t.output_tokens[k]
        assert p.mean() == pytest.approx(truncated_lognormal_mean(m.prompt_mu, m.prompt_sigma, 8192),
                                         rel=0.02)
        assert o.mean() == pytest.approx(truncated_lognormal_mean(m.output_mu, m.output_sigma, 2048),
                                         rel=0.02)
        assert np.median(np.log(o)) == pytest.approx(m.output_mu, abs=0.02)
        assert (p == 8192).mean() < 0.005  # truncated, not clipped: no spike at the cap


def test_synth_mix_counts_and_bad_args():
    t = synth_trace(3000, 4.0, mix={"chat": 0.217, "code": 0.389, "math": 0.394}, seed=1)
    assert {d: int((t.domain == d).sum()) for d in ("chat", "code", "math")} == \
        {"chat": 651, "code": 1167, "math": 1182}
    for kw, field in [(dict(cv=1.5), "cv"), (dict(mix="chat=1,poetry=1"), "mix"),
                      (dict(mix="chat"), "mix"), (dict(mix="chat=-1,code=2"), "mix"),
                      (dict(arrival="weibull"), "arrival"), (dict(seed=-1), "seed")]:
        with pytest.raises(SpecsimInputError) as ei:
            synth_trace(10, 1.0, **kw)
        assert ei.value.field == field
    with pytest.raises(SpecsimInputError) as ei:
        synth_trace(10, 0.0)
    assert ei.value.field == "rate"
    # a count that would fill the machine's memory is refused before anything is drawn (a typo in a rate or a
    # duration; a fresh user's --rate 1e9 --duration 1e9 failed deep in numpy, --rate 1e5 --duration 1e3 ran to 13 GB)
    from specsim.workload.synth import MAX_SYNTH_REQUESTS
    for args, kw, field in [((MAX_SYNTH_REQUESTS + 1, 1.0), {}, "num_requests"),
                            ((None, 1e9), dict(duration_s=1e9), "rate x duration_s"),
                            ((None, 1e5), dict(duration_s=1e3), "rate x duration_s")]:
        with pytest.raises(SpecsimInputError) as ei:
            synth_trace(*args, **kw)
        assert ei.value.field == field


def test_length_constants_match_refit(shared):
    refit = fit_length_models(shared / "data")
    for d, m in LENGTH_MODELS.items():
        for f in ("prompt_mu", "prompt_sigma", "output_mu", "output_sigma", "rho"):
            assert getattr(m, f) == pytest.approx(getattr(refit[d], f), abs=5.1e-5), (d, f)


def test_bundled_prod_trace_regenerates(tmp_path):
    path = REPO / "traces" / "prod.jsonl"
    assert path.stat().st_size < 300_000
    bundled = load_trace(path)
    regen = synth_trace(**PROD_ARGS)
    assert regen.content_hash() == bundled.content_hash()
    save_trace(regen, tmp_path / "prod.jsonl")
    assert (tmp_path / "prod.jsonl").read_bytes() == path.read_bytes()  # bit-identical
    st = trace_stats(bundled)
    assert st["rate_req_per_s"] == pytest.approx(4.0, rel=0.05)
    assert st["interarrival_cv"] == pytest.approx(1.5, rel=0.05)


# ------------------------------------------------------------------------------------- CLI


def run_cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    from specsim.cli import main
    monkeypatch.setattr(sys, "argv", ["specsim", *args])
    with pytest.raises(SystemExit) as ei:
        main()
        sys.exit(0)
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


def test_cli_synth_convert_stats(tmp_path, monkeypatch, capsys):
    out = tmp_path / "s.jsonl"
    rc, o, _ = run_cli(monkeypatch, capsys, "trace", "synth", "--num-requests", "50", "--rate", "2",
                       "--arrival", "gamma", "--cv", "2", "--mix", "code=1", "--seed", "5",
                       "--out", str(out))
    assert rc == 0 and "wrote 50 requests" in o
    assert load_trace(out).content_hash() == synth_trace(
        50, 2.0, arrival="gamma", cv=2.0, mix="code=1", seed=5).content_hash()
    mc = mooncake_file(tmp_path, [0, 0, 3000])
    rc, o, _ = run_cli(monkeypatch, capsys, "trace", "convert", "--from", "mooncake", "--slots",
                       "spread", str(mc), str(tmp_path / "m.jsonl"))
    converted = load_trace(tmp_path / "m.jsonl")
    assert rc == 0 and converted.arrival_s.tolist() == [0.0, 1.5, 3.0]
    assert converted.hash_ids == ((0,), (1,), (2,))
    assert converted.hash_block_tokens.tolist() == [512] * 3
    # converting a file onto itself is refused before anything is read or written
    before = mc.read_bytes()
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "convert", "--from", "mooncake", str(mc), str(mc))
    assert rc == 2 and "other than the input file" in err and mc.read_bytes() == before
    rc, o, _ = run_cli(monkeypatch, capsys, "trace", "stats", "--json", str(out))
    assert rc == 0 and json.loads(o)["num_requests"] == 50
    assert json.loads(o)["domains"]["code"]["num_requests"] == 50
    rc, o, _ = run_cli(monkeypatch, capsys, "trace", "stats", str(out))
    # the header wraps and the table's cells shrink on a narrow terminal (or with a long tmp path)
    assert rc == 0 and "50 requests" in " ".join(o.split())


def test_cli_synth_refuses_what_a_run_would_refuse(tmp_path, monkeypatch, capsys):
    """A fresh user's `trace synth --rate 1e-12` wrote a trace spanning 8.8e12 s that every run then refused, and
    `--turns 7` without `--sessions` was silently ignored: both are refused before anything is written."""
    out = tmp_path / "x.jsonl"
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "synth", "--num-requests", "10", "--rate", "1e-12",
                         "--out", str(out))
    assert rc == 2 and "field 'rate'" in err and "bound on simulated time" in " ".join(err.split())
    assert not out.exists()
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "synth", "--num-requests", "10", "--rate", "1", "--turns", "7",
                         "--out", str(out))
    assert rc == 2 and "--turns only with --sessions" in " ".join(err.split()) and not out.exists()
    # sessions: --num-requests was silently ignored; think times beyond specsim's bound on simulated time ran a
    # session of 1e12 s
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "synth", "--rate", "2", "--sessions", "5", "--num-requests", "7",
                         "--out", str(out))
    assert rc == 2 and "--sessions and --turns alone set the number of requests" in " ".join(err.split())
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "synth", "--rate", "2", "--sessions", "3", "--think",
                         "const:1e12", "--out", str(out))
    assert rc == 2 and "field 'think_s'" in err and not out.exists()


def test_cli_bad_input_one_line_exit_2(tmp_path, monkeypatch, capsys):
    p = write(tmp_path, line() + "\n" + line(arrival_s=0.5) + "\n")
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "stats", str(p))
    assert rc == 2
    assert err.strip().count("\n") == 0 and "line 2" in err and "arrival_s" in err


def test_cli_convert_azure_iso_and_mixed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "iso.jsonl"
    rc, _, _ = run_cli(monkeypatch, capsys, "trace", "convert", str(DATA / "azure_iso_tz.csv"), str(out),
                       "--from", "azure")
    assert rc == 0 and load_trace(out).arrival_s.tolist() == [0.0, 0.5, 1.75]
    rc, stdout, err = run_cli(monkeypatch, capsys, "trace", "convert", str(DATA / "azure_mixed_tz.csv"),
                              str(tmp_path / "m.jsonl"), "--from", "azure")
    assert rc == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1
    assert "line 3" in err and "TIMESTAMP" in err and "mixes zone-aware and naive" in err
    # an option of another format is refused, not silently ignored; the output is not created
    for opt in (["--time-unit", "ms"], ["--skip-bad"], ["--slots", "spread"], ["--seed", "3"]):
        rc, _, err = run_cli(monkeypatch, capsys, "trace", "convert", str(DATA / "azure_iso_tz.csv"),
                             str(tmp_path / "o.jsonl"), "--from", "azure", *opt)
        assert rc == 2 and f"{opt[0]} with --from" in err and "(it does not apply to --from azure)" in err
    assert not (tmp_path / "o.jsonl").exists()


def test_an_unknown_trace_field_names_file_line_key_and_the_closest_field():
    """Issue 24 item 10: ``domian`` is refused instead of silently running as ``chat``."""
    src = DATA / "field_typo_domain.jsonl"
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(src)
    e = ei.value
    assert (e.file, e.line, e.field) == (str(src), 1, "domian") and "closest valid: 'domain'" in e.expected


def test_own_fields_with_the_x_prefix_are_accepted_and_not_read(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"arrival_s":0,"prompt_tokens":5,"output_tokens":2,"domain":"code","x_user":"u7","x_n":[1]}\n'
                 '{"arrival_s":1,"prompt_tokens":6,"output_tokens":3,"x_turn":{"a":2}}\n')
    t = load_trace(p)
    assert t.domain.tolist() == ["code", "chat"] and t.prompt_tokens.tolist() == [5, 6] and t.extra == {}
    p.write_text('{"arrival_s":0,"prompt_tokens":5,"output_tokens":2,"stag":1}\n')
    with pytest.raises(SpecsimInputError) as ei:
        load_trace(p)
    assert (ei.value.line, ei.value.field) == (1, "stag") and "closest valid: 'stage'" in ei.value.expected


def test_convert_notes_domains_no_table_knows(tmp_path, monkeypatch, capsys):
    """A fresh user mapped an endpoint column to domain: convert wrote it silently and the run refused it later.
    convert now says so at once; known domains get no note."""
    csv = tmp_path / "log.csv"
    csv.write_text("ts,in,out,route\n0,10,20,/v1/completions\n5,10,20,/v1/chat\n9,10,20,code\n")
    base = ["trace", "convert", str(csv), str(tmp_path / "t.jsonl"), "--from", "table", "--time-unit", "ms"]
    rc, _, err = run_cli(monkeypatch, capsys, *base, "--map", "arrival_s=ts,prompt_tokens=in,output_tokens=out,"
                         "domain=route")
    err = " ".join(err.split())
    assert rc == 0 and "2 requests carry domains no built-in acceptance table knows" in err and "'/v1/chat' (1)" in err
    rc, _, err = run_cli(monkeypatch, capsys, *base, "--map", "arrival_s=ts,prompt_tokens=in,output_tokens=out")
    assert rc == 0 and "no built-in acceptance table" not in err


def test_stages_and_sessions_refuse_more_requests_than_a_trace_may_hold():
    """--stages 1e9:1e9 crashed deep in numpy and 10:1e7 took 4.8 GB before the cap refused it (a fresh user's);
    --sessions x --turns named num_requests, not the flags given."""
    from specsim.workload.conversations import synthetic_conversations
    from specsim.workload.stages import parse_stages

    for text in ("1e9:1e9", "10:1e7", "2:60,0->1e6:100"):
        with pytest.raises(SpecsimInputError) as ei:
            parse_stages(text)
        assert ei.value.file == "--stages" and "10,000,000" in str(ei.value)
    assert len(parse_stages("2:60,2->8:120")) == 2
    with pytest.raises(SpecsimInputError, match="100000000 sessions x 10 turns"):
        synthetic_conversations(100_000_000, 10, seed=0)


def test_convert_names_the_file_line_of_an_empty_domain(tmp_path, monkeypatch, capsys):
    """An empty mapped domain on the file's line 3 was reported at line 2 (the request's position)."""
    csv = tmp_path / "t.csv"
    csv.write_text("t,in,out,task\n0.0,100,50,chat\n1.0,100,50,\n")
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "convert", str(csv), str(tmp_path / "t.jsonl"), "--from",
                         "table", "--map", "arrival_s=t,prompt_tokens=in,output_tokens=out,domain=task")
    assert rc == 2 and f"{csv}, line 3, field 'task'" in " ".join(err.split())


def test_cli_synth_says_how_many_requests_the_default_window_refuses(tmp_path, monkeypatch, capsys):
    """A fresh user's session trace had 107 of 240 requests beyond the default profile's 4,096-token window,
    found only when the run refused them: synth and convert now say so when they write the trace."""
    out = tmp_path / "s.jsonl"
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "synth", "--rate", "1", "--sessions", "20", "--turns", "4",
                         "--think", "lognormal:4:0.8", "--seed", "3", "--out", str(out))
    tr = load_trace(out)
    over = int((tr.prompt_tokens + tr.output_tokens > 4096).sum())
    assert rc == 0 and over > 0
    assert f"note: {over} of its {len(tr)} requests exceed 4,096 tokens (prompt + output)" in " ".join(err.split())
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "synth", "--num-requests", "20", "--rate", "1",
                         "--mix", "chat=1", "--seed", "1", "--out", str(tmp_path / "short.jsonl"))
    fits = load_trace(tmp_path / "short.jsonl")
    assert rc == 0 and ("exceed" in err) == bool((fits.prompt_tokens + fits.output_tokens > 4096).any())


def test_cli_stats_checks_the_context_window_of_the_named_scenario(tmp_path, monkeypatch, capsys):
    """`trace stats` checked nothing (and synth's note named only the default scenario's Llama-2 4,096-token
    window): --scenario / --set check the requests against the user's model and engine.max_model_len."""
    root = Path(__file__).resolve().parents[1]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"arrival_s": float(i), "prompt_tokens": 3000, "output_tokens": 2000}) + "\n"
                         for i in range(3)))
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "stats", str(p))
    err = " ".join(err.split())
    assert rc == 0 and "3 of its 3 requests exceed 4,096 tokens (prompt + output), the default scenario's" in err
    assert "`specsim trace stats FILE --scenario S.toml` checks against your scenario's model" in err
    b200 = root / "specsim" / "scenarios" / "b200-qwen3.8-27b-vllm.toml"
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "stats", str(p), "--scenario", str(b200))
    # its profile's model names no window (vLLM served it with --max-model-len 16384, not in the file)
    assert rc == 0 and "the scenario's context window is unknown (no limit): a run refuses none of the 3" in \
        " ".join(err.split())
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "stats", str(p), "--set", "engine.max_model_len=16384")
    assert rc == 0 and "note: all 3 requests fit the scenario's context window of 16,384 tokens" in " ".join(err.split())
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "stats", "--json", str(p), "--scenario", str(b200), "--set",
                         "engine.max_model_len=4000")
    err = " ".join(err.split())
    assert rc == 0 and "3 of its 3 requests exceed 4,000 tokens" in err and "(engine.max_model_len)" in err
    rc, _, err = run_cli(monkeypatch, capsys, "trace", "stats", str(p), "--set", "engine.foo=1")
    assert rc == 2 and "engine.foo" in err
