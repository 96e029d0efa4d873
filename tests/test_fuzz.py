"""Property-based tests of every parser a user feeds (issue 13, Fuzzing).

Inputs: trace JSONL, the Azure and Mooncake converters, profile JSON, scenario TOML and ``--set``,
counters dumps and plug-in specs, each as arbitrary bytes and as mutations of a valid file. The property:
the CLI (run in-process through ``specsim.cli.main``), or the library's parse function followed by the
CLI's error path, either succeeds or exits 2 with one line ``specsim: error: ...``; never a traceback.
A generous per-input alarm (:data:`HANG_S`) catches hangs; it is not a speed assertion.

Hypothesis runs derandomized (the same examples on every machine, so CI is reproducible), with bounded
``max_examples`` (the file takes well under two minutes on two cores) and no example database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import math
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

if os.environ.get("CI", "").lower() != "true":      # CI installs the dev extras: a missing hypothesis fails there
    pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specsim.cli import _one_line, main  # noqa: E402
from specsim.errors import SpecsimInputError  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parent.parent
#: Seconds one input may take before it counts as a hang (generous: parsing takes milliseconds).
HANG_S = 30

#: ``SPECSIM_FUZZ_SCALE=K`` runs K times the examples; ``SPECSIM_FUZZ_RANDOM=1`` draws new ones each run
#: (for hunting locally; CI uses neither, so it runs the same examples every time).
SCALE = max(1, int(os.environ.get("SPECSIM_FUZZ_SCALE", "1")))
FUZZ = settings(derandomize=os.environ.get("SPECSIM_FUZZ_RANDOM") != "1", database=None, deadline=None,
                max_examples=60 * SCALE,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def examples(n: int) -> settings:
    """:data:`FUZZ` with ``n`` examples (times the scale)."""
    return settings(FUZZ, max_examples=n * SCALE)


class Hang(Exception):
    """An input ran past :data:`HANG_S` seconds."""


@contextlib.contextmanager
def hang_guard(seconds: float = HANG_S):
    """Raise :class:`Hang` in the main thread if the block runs past ``seconds`` (POSIX alarm)."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise Hang(f"input still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cli(*args: str) -> tuple[int, str, str]:
    """Run ``specsim ARGS`` in-process: (exit status, stdout, stderr). Any other exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["specsim", *args]
    try:
        with hang_guard(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


def assert_ok_or_one_line(code: int, out: str, err: str) -> None:
    """The property: success, or exit 2 with exactly one ``specsim: error:`` line and no traceback."""
    assert "Traceback" not in out + err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("specsim: error: "), err
        assert "np.float64" not in err and "np.int64" not in err and " at 0x" not in err, err


def library(fn, *args, **kwargs):
    """Call a library parser, then the CLI's error path: a SpecsimInputError must print as one line."""
    try:
        with hang_guard():
            return fn(*args, **kwargs)
    except SpecsimInputError as e:
        line = f"specsim: error: {_one_line(e)}"
        assert "\n" not in line and "np.float64" not in line and " at 0x" not in line, line
        return None


def tmpfile(data: bytes | str, name: str) -> Path:
    """Write ``data`` to a new file ``name`` in a fresh temporary folder (kept until the process ends)."""
    p = Path(tempfile.mkdtemp(prefix="specsim-fuzz-")) / name
    p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return p


# ------------------------------------------------------------------------------------------ strategies

#: Any JSON value (NaN / Infinity included: Python's json writes and reads them), nested a little.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8)

#: Small byte strings biased towards the characters the formats use.
ascii_soup = st.text(alphabet=st.sampled_from(list('{}[]":,.-+eE0123456789 \n\tTZaz/#=_')), max_size=200)


@st.composite
def mutated_bytes(draw, valid: bytes) -> bytes:
    """``valid`` with a few byte-level edits: flips, deletions, insertions, truncation, duplication."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "duplicate"]))
        if not data:
            data += draw(st.binary(min_size=1, max_size=4))
            continue
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 8))]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=6) | ascii_soup.map(str.encode))
        elif op == "truncate":
            del data[i:]
        else:
            data[i:i] = data[i:i + draw(st.integers(1, 40))]
    return bytes(data)


@st.composite
def mutated_json_lines(draw, valid_lines: list[dict]) -> str:
    """Valid JSON objects (one per line) with fields replaced, deleted or added, lines dropped or swapped."""
    rows = [dict(r) for r in valid_lines]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "delete", "add", "drop", "swap"]))
        r = draw(st.integers(0, len(rows) - 1)) if rows else 0
        if not rows:
            break
        keys = sorted(rows[r])
        if op == "replace" and keys:
            rows[r][draw(st.sampled_from(keys))] = draw(json_values)
        elif op == "delete" and keys:
            rows[r].pop(draw(st.sampled_from(keys)))
        elif op == "add":
            rows[r][draw(st.text(max_size=8) | st.sampled_from(keys or ["x"]))] = draw(json_values)
        elif op == "drop":
            rows.pop(r)
        else:
            j = draw(st.integers(0, len(rows) - 1))
            rows[r], rows[j] = rows[j], rows[r]
    return "".join(json.dumps(r) + "\n" for r in rows)


def jsonl_rows(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


# ----------------------------------------------------------------------------------------------- traces

TRACE_ROWS = jsonl_rows(DATA / "shared_prefix.jsonl")


def check_trace_stats(data: bytes | str) -> None:
    p = tmpfile(data, "t.jsonl")
    assert_ok_or_one_line(*cli("trace", "stats", str(p), "--json"))


@FUZZ
@given(st.binary(max_size=300) | ascii_soup)
def test_trace_jsonl_arbitrary_bytes(data):
    check_trace_stats(data)


@examples(120)
@given(st.data())
def test_trace_jsonl_mutations(data):
    if data.draw(st.booleans()):
        text = data.draw(mutated_json_lines(TRACE_ROWS))
    else:
        text = data.draw(mutated_bytes((DATA / "shared_prefix.jsonl").read_bytes()))
    check_trace_stats(text)


AZURE_VALID = (DATA / "azure_iso_tz.csv").read_bytes()
MOONCAKE_ROWS = [{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]},
                 {"timestamp": 3000, "input_length": 100, "output_length": 20, "hash_ids": [1]},
                 {"timestamp": 3000, "input_length": 1025, "output_length": 5, "hash_ids": [3, 4, 5]}]


def check_convert(data: bytes | str, fmt: str, slots: str = "burst") -> None:
    src = tmpfile(data, "in.csv" if fmt == "azure" else "in.jsonl")
    assert_ok_or_one_line(*cli("trace", "convert", str(src), str(src.with_name("out.jsonl")), "--from", fmt,
                               "--slots", slots))


@FUZZ
@given(st.binary(max_size=300) | ascii_soup, st.sampled_from(["azure", "mooncake"]))
def test_converters_arbitrary_bytes(data, fmt):
    check_convert(data, fmt)


#: One timestamp cell: a real time in one of the accepted forms, or pieces of one put together wrongly.
time_texts = st.one_of(
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]{0,14})?)?"
                  r"(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)?\Z"),
    st.text(alphabet="0123456789-:.T Z+", max_size=30),
)


@examples(100)
@given(st.data())
def test_azure_mutations(data):
    if data.draw(st.booleans()):
        n = data.draw(st.integers(1, 5))
        cells = [(data.draw(time_texts), data.draw(st.from_regex(r"\A[0-9 -]{0,20}\Z") | st.text(max_size=5)),
                  str(data.draw(st.integers(-3, 10**20)))) for _ in range(n)]
        body = "".join(f'"{t}",{c},{g}\n' for t, c, g in cells)
        text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + body
    else:
        text = data.draw(mutated_bytes(AZURE_VALID))
    check_convert(text, "azure")


@examples(80)
@given(st.data())
def test_mooncake_mutations(data):
    if data.draw(st.booleans()):
        text = data.draw(mutated_json_lines(MOONCAKE_ROWS))
    else:
        text = data.draw(mutated_bytes("".join(json.dumps(r) + "\n" for r in MOONCAKE_ROWS).encode()))
    check_convert(text, "mooncake", data.draw(st.sampled_from(["burst", "spread"])))


ZONES = st.sampled_from([None, dt.timezone.utc, dt.timezone(dt.timedelta(hours=1)),
                         dt.timezone(dt.timedelta(hours=-4, minutes=-30)), dt.timezone(dt.timedelta(hours=14))])


@examples(60)
@given(st.lists(st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1)),
                min_size=1, max_size=6),
       ZONES, st.sampled_from(["T", " "]), st.sampled_from(["+HH:MM", "+HHMM", "Z"]),
       st.integers(0, 6))
def test_azure_times_match_datetime(times, zone, sep, zone_form, extra_digits):
    """Property with an oracle: arrivals equal Python's datetime differences, for every accepted form."""
    from specsim.workload import convert_azure

    times = sorted(t.replace(tzinfo=zone) for t in times)

    def form(t: dt.datetime) -> str:
        text = t.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + f".{t.microsecond:06d}" + "0" * extra_digits
        if t.tzinfo is None:
            return text
        off = t.utcoffset()
        if off == dt.timedelta(0) and zone_form == "Z":
            return text + "Z"
        sign = "-" if off < dt.timedelta(0) else "+"
        h, m = divmod(abs(off) // dt.timedelta(minutes=1), 60)
        return text + f"{sign}{h:02d}{':' if zone_form != '+HHMM' else ''}{m:02d}"

    p = tmpfile("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{form(t)},5,5\n" for t in times), "t.csv")
    got = convert_azure(p).arrival_s.tolist()
    want = [(t - times[0]) // dt.timedelta(microseconds=1) * 1000 / 1e9 for t in times]
    assert got == want


# --------------------------------------------------------------------------------------------- profiles

PROFILE_VALID = (DATA / "flat20ms_profile.json").read_bytes()


def check_profile(data: bytes | str) -> None:
    from specsim.hardware.profile import load_profile

    prof = library(load_profile, tmpfile(data, "p.json"))
    if prof is not None:                                   # a loaded profile answers a lookup or refuses
        library(prof.step_time, 1)


@FUZZ
@given(st.binary(max_size=300) | ascii_soup)
def test_profile_arbitrary_bytes(data):
    check_profile(data)


@examples(100)
@given(st.data())
def test_profile_mutations(data):
    doc = json.loads(PROFILE_VALID)
    if data.draw(st.booleans()):
        doc["prefill_attention"] = {"num_layers": 2, "chunk_tokens": [16, 32], "context_tokens": [0, 64],
                                    "ms_per_layer": [[0.1, 0.2], [0.2, 0.3]]}
    for _ in range(data.draw(st.integers(1, 3))):
        target = doc if "prefill_attention" not in doc or data.draw(st.booleans()) else doc["prefill_attention"]
        if not isinstance(target, dict):
            break
        keys = sorted(target) + ["extrapolate", "lookup", "kv_read_s_per_token", "metadata"]
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.integers(0, 4)) == 0:
            target.pop(key, None)
        elif isinstance(target.get(key), list) and target[key] and data.draw(st.booleans()):
            lst = target[key]
            lst[data.draw(st.integers(0, len(lst) - 1))] = data.draw(json_values)
        else:
            target[key] = data.draw(json_values)
    text = json.dumps(doc)
    if data.draw(st.integers(0, 3)) == 0:
        text = data.draw(mutated_bytes(text.encode()))
    check_profile(text)


@examples(60)
@given(st.data())
def test_vidur_csv_mutations(data):
    """``profile import-vidur``'s reader: a Vidur mlp.csv, mutated, is read or refused on one line."""
    from specsim.hardware.vidur import layer_table, read_operator_csv

    valid = vidur_mlp_csv(Path(tempfile.mkdtemp(prefix="specsim-fuzz-"))).read_bytes()
    p = tmpfile(data.draw(mutated_bytes(valid) | st.binary(max_size=100)), "mlp.csv")
    df = library(read_operator_csv, p)
    if df is not None:
        library(layer_table, df, 1, str(p))


# -------------------------------------------------------------------------------------------- scenarios

DEFAULT_TOML = (REPO / "specsim" / "scenarios" / "default.toml").read_bytes()


def scenario_keys() -> list[str]:
    from specsim.scenario import SECTIONS

    return [f"{name}.{f}" for name, cls in SECTIONS.items() for f in cls.__dataclass_fields__]


#: A ``--set`` right-hand side: TOML-looking values and junk.
set_values = st.one_of(
    st.integers(-(2**70), 2**70).map(str), st.floats().map(repr), st.sampled_from(
        ["true", "false", "nan", "inf", "-inf", "[]", "[1, 2]", "{}", "{a = 1}", "'x'", '"', "[", "{",
         "[[1]]", "{code=[0.75,0.75]}", "1e999", "0x10", "1_000", "2024-03-01T00:00:00Z"]),
    st.text(max_size=12))


@examples(120)
@given(st.data())
def test_scenario_set_overrides(data):
    from specsim.scenario import load_scenario

    keys = scenario_keys()
    items = []
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(keys) | st.sampled_from(keys).map(lambda k: k + ".x")
                        | st.text(alphabet="abcdefghijklmnopqrstuvwxyz._= ", max_size=16))
        items.append(f"{key}={data.draw(set_values)}" if data.draw(st.integers(0, 5)) else key)
    library(load_scenario, None, items)


@examples(80)
@given(st.data())
def test_scenario_toml(data):
    from specsim.scenario import load_scenario

    if data.draw(st.booleans()):
        lines = DEFAULT_TOML.decode().splitlines()
        for _ in range(data.draw(st.integers(1, 3))):
            values = [i for i, ln in enumerate(lines) if "=" in ln and not ln.lstrip().startswith("#")]
            i = data.draw(st.sampled_from(values))
            lines[i] = lines[i].split("=", 1)[0] + "= " + data.draw(set_values)
        text = "\n".join(lines).encode()
    else:
        text = data.draw(st.binary(max_size=200) | mutated_bytes(DEFAULT_TOML) | ascii_soup.map(str.encode))
    library(load_scenario, tmpfile(text, "s.toml"))


# --------------------------------------------------------------------------------------------- counters

COUNTERS_CSV = ("config_id,num_spec_tokens,num_drafts,num_draft_tokens,accepted_tokens_pos1,accepted_tokens_pos2,"
                "frac_drafts_accepting_pos1,frac_drafts_accepting_pos2,reported_mean_acceptance_length\n"
                "a,2,200,400,150,90,0.75,0.45,2.2\nb,2,,,,,0.6,0.3,\n").encode()
PROM_DUMP = ("# TYPE vllm:spec_decode_num_drafts_total counter\n"
             'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0\n'
             'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 3000.0\n'
             'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 700.0\n'
             'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 500.0\n'
             'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 300.0\n'
             ).encode()


@examples(150)
@given(st.data())
def test_counters_dumps(data):
    name, valid = data.draw(st.sampled_from([("c.csv", COUNTERS_CSV), ("metrics.txt", PROM_DUMP),
                                             ("c.json", b'{"alpha": [1]}')]))
    text = data.draw(mutated_bytes(valid) | st.binary(max_size=200) | ascii_soup.map(str.encode))
    p = tmpfile(text, name)
    assert_ok_or_one_line(*cli("counters", str(p), "--out", str(p.with_name("table.json"))))


# ---------------------------------------------------------------------------------------------- plug-ins



@examples(80)
@given(st.data())
def test_plugin_specs(data):
    from specsim.policies.plugins import is_plugin_spec, load_plugin

    folder = Path(tempfile.mkdtemp(prefix="specsim-fuzz-"))
    good = "def always_two(view):\n    return view.gamma * 0 + 2\n\nclass NotAPolicy:\n    pass\n\nX = 5\n"
    body = data.draw(st.sampled_from([good.encode()]) | mutated_bytes(good.encode()) | st.binary(max_size=60))
    (folder / "p.py").write_bytes(body)
    spec = data.draw(st.sampled_from([f"{folder}/p.py:always_two", f"{folder}/p.py:NotAPolicy",
                                      f"{folder}/p.py:X", f"{folder}/p.py:", f"{folder}/p.py:missing",
                                      f"{folder}/none.py:X", f"{folder}:X.py:Y", f"{folder}/p.py:a:b"])
                     | st.text(max_size=20).map(lambda s: s + ".py:" + s)
                     | st.text(max_size=30))
    if is_plugin_spec(spec):
        library(load_plugin, spec, gamma=data.draw(st.integers(0, 8)))


# ------------------------------------------------------------------- inputs the fuzzer rarely draws

DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000


@pytest.mark.parametrize("args,text", [
    (("trace", "stats"), '{"arrival_s": 0, "prompt_tokens": ' + HUGE_INT + ', "output_tokens": 1}\n'),
    (("trace", "stats"), '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1, "x": ' + DEEP + "}\n"),
    (("trace", "stats"), '{"arrival_s": 0, "prompt_tokens": 18446744073709551616, "output_tokens": 1}\n'),
    (("trace", "stats"), '{"arrival_s": 1e999, "prompt_tokens": 5, "output_tokens": 1}\n'),
    (("trace", "convert", "--from", "mooncake"), '{"timestamp": 1e999, "input_length": 5, "output_length": 1}\n'),
    (("trace", "convert", "--from", "mooncake"), '{"timestamp": ' + HUGE_INT + ', "input_length": 5}\n'),
    (("trace", "convert", "--from", "azure"), "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                              "0001-01-01 00:00:00,5,5\n9999-12-31 23:59:59,5,5\n"),
    (("counters",), "vllm:spec_decode_num_drafts 1e999\n"),
])
def test_rare_inputs_are_one_line_errors(args, text):
    src = tmpfile(text, "in.csv" if "azure" in args else "in.jsonl")
    argv = [*args[:2], str(src)] + ([str(src.with_name("o.jsonl"))] if args[:2] == ("trace", "convert") else [])
    argv += list(args[2:]) + (["--out", str(src.with_name("t.json"))] if args[0] == "counters" else [])
    code, out, err = cli(*argv)
    assert code == 2, (code, out, err)
    assert_ok_or_one_line(code, out, err)


@pytest.mark.parametrize("text", [DEEP, '{"batch_tokens": [' + HUGE_INT + '], "step_time_s": [0.1]}',
                                  '{"batch_tokens": [1, 1099511627776], "step_time_s": [0.1, 0.2]}',
                                  '{"batch_tokens": [1], "step_time_s": [0.1], "metadata": null}',
                                  '{"batch_tokens": [1], "step_time_s": [0.1], "kv_read_s_per_token": "0"}',
                                  '{"batch_tokens": [1], "step_time_s": [0.1], "prefill_attention": {}}'])
def test_profile_rare_inputs(text):
    from specsim.hardware.profile import load_profile

    with pytest.raises(SpecsimInputError) as ei:
        load_profile(tmpfile(text, "p.json"))
    assert "\n" not in str(ei.value) and "Error(" not in str(ei.value)


# ------------------------------------------------------------- error messages without internals (item 12)

def vidur_mlp_csv(folder: Path, nan_row: int | None = None) -> Path:
    """A three-row Vidur mlp.csv (tp 1; every operator 0.01 ms x row), with NaN in ``emb`` at ``nan_row``."""
    from specsim.hardware.vidur import OPERATORS, SHAPE_COLUMNS, _median_col

    cols = [_median_col(o) for o in ("emb",) + OPERATORS] + list(SHAPE_COLUMNS)
    cols += ["num_tokens", "num_tensor_parallel_workers"]
    rows = []
    for k in range(3):
        ops = ["nan" if (nan_row == k and i == 0) else str(0.01 * (k + 1)) for i in range(len(OPERATORS) + 1)]
        rows.append(",".join(ops + ["128"] * len(SHAPE_COLUMNS) + [str(2 ** k), "1"]))
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "mlp.csv"
    p.write_text(",".join(cols) + "\n" + "\n".join(rows) + "\n")
    return p


def test_vidur_nan_shown_plainly(tmp_path):
    p = vidur_mlp_csv(tmp_path / "compute" / "h100" / "org" / "Llama-2-7b-hf", nan_row=1)
    code, out, err = cli("profile", "import-vidur", "--mlp", str(p), "--gpu", "h100", "--out", str(tmp_path))
    assert code == 2 and "line 3" in err and "time_stats.emb.median" in err
    assert err.rstrip().endswith("got NaN") and "np." not in err


def test_vidur_unknown_depth_names_a_real_option(tmp_path):
    p = vidur_mlp_csv(tmp_path / "compute" / "h100" / "org" / "OneLayer")
    code, _, err = cli("profile", "import-vidur", "--mlp", str(p), "--gpu", "h100", "--out", str(tmp_path / "o"))
    assert code == 2 and "--num-layers" in err and "'OneLayer'" in err
    code, out, err = cli("profile", "import-vidur", "--mlp", str(p), "--gpu", "h100", "--out", str(tmp_path / "o"),
                         "--num-layers", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "o" / "h100-onelayer-tp1.json").read_text())
    assert doc["metadata"]["num_layers"] == 1
    # one layer of 9 operators at 0.01 ms plus the 0.01 ms embedding, and any attention term on top
    assert doc["step_time_s"][0] >= 0.1e-3 * (1 - 1e-9)
    code, _, err = cli("profile", "import-vidur", "--mlp", str(p), "--gpu", "h100", "--out", str(tmp_path / "o"),
                       "--num-layers", "1", "--attention", str(tmp_path / "missing.csv"))
    assert code == 2 and "missing.csv" in err and "attention" in err


@pytest.mark.parametrize("attr,words", [("", ["nothing after the ':'"]), ("a b", ["'a b'", "identifier"]),
                                        ("X", ["int 5", "not callable"]), ("C", ["an instance of _C"])])
def test_plugin_spec_messages(tmp_path, attr, words):
    from specsim.policies.plugins import load_plugin

    (tmp_path / "p.py").write_text("X = 5\nclass _C:\n    pass\nC = _C()\n")
    with pytest.raises(SpecsimInputError) as ei:
        load_plugin(f"{tmp_path}/p.py:{attr}")
    for w in words:
        assert w in str(ei.value)
    assert " at 0x" not in str(ei.value)
