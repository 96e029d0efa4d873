"""The one table renderer (specsim.fmt.table) at 40, 80 and 200 columns, and the sweep's seed-spread table."""

from __future__ import annotations

import pytest

from specsim import fmt
from specsim.cli.sweep_cmd import spread_text
from specsim.sweep import results_frame, seed_spread
from test_frontier import synthetic_records

WIDTHS = [40, 80, 200]


def _numbers(text: str) -> set[str]:
    return set(text.replace(" / ", " ").split())


@pytest.mark.parametrize("width", WIDTHS)
def test_spread_table_fits_and_keeps_every_number(width):
    df = results_frame(synthetic_records())
    text = spread_text(df, width)
    assert max(len(line) for line in text.splitlines()) <= width
    tokens = _numbers(text)
    for _, r in seed_spread(df).iterrows():
        assert {r.curve, f"{r.load:g}", fmt.number(r.mean_tps_per_user_mean), fmt.number(r.mean_tps_per_user_std),
                fmt.number(r.output_throughput_per_gpu_mean, 0), fmt.number(r.output_throughput_per_gpu_std, 0),
                fmt.number(r.mean_verify_tokens_per_request_mean, 2)} <= tokens


def test_spread_table_shows_no_spread_with_one_seed():
    df = results_frame(synthetic_records())
    one = spread_text(df[df.seed == 0], 200)
    assert "+-" not in one and "std" not in one.split() and "one seed" in one
    # two seeds: the std columns are there, seeds +-1 around the mean (the records' construction): std sqrt(2)
    two = spread_text(df, 200)
    assert two.count("+-std") == 2 and fmt.number(2 ** 0.5) in two.split()


@pytest.mark.parametrize("width", WIDTHS)
def test_numbers_are_never_wrapped_even_when_the_text_is(width):
    cols = ["policy", "note", "tok/s/GPU", "gain"]
    rows = [["dspark-async tuned threshold", "a long free-text note that has to wrap at narrow widths",
             "12,345,678", "+123.4%"], ["mtp1", "baseline", "9,876", "-"]]
    text = fmt.table(cols, rows, keys=1, width=width, title="t")
    assert max(len(line) for line in text.splitlines()) <= width
    tokens = _numbers(text)
    assert {"12,345,678", "+123.4%", "9,876", "dspark-async", "threshold", "mtp1"} <= tokens


@pytest.mark.parametrize("width", WIDTHS)
def test_several_text_columns_narrow_before_any_number(width):
    # import-results' layout: three key columns of text (one with spaces) and two number columns
    cols = ["file", "tool", "load", "TPS/user", "tok/s per GPU", "TPS/user from"]
    rows = [["guidellm_report.json", "guidellm", "constant rate 3.0 req/s", "50.0", "150.0", "1000 / mean TPOT"],
            ["vllm_bench_serve_c16.json", "vllm", "concurrency 16", "50.0", "300.0", "1000 / mean TPOT"]]
    text = fmt.table(cols, rows, keys=3, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    tokens = _numbers(text)
    assert {"150.0", "300.0", "50.0", "guidellm_report.json", "vllm_bench_serve_c16.json", "concurrency"} <= tokens
    assert all(len(line.split()) for line in text.splitlines() if "GPU" in line)   # the header is whole
    assert "GPU" in tokens and "tok/s" in tokens


def test_sweep_names_the_points_that_thrash():
    from specsim.cli.sweep_cmd import caution_text

    df = results_frame(synthetic_records())
    df["total_output_tokens"], df["recomputed_tokens"] = 1000.0, 0.0
    assert caution_text(df) == ""
    df.loc[(df.curve == "A") & (df.load == 16), "recomputed_tokens"] = 251.0      # over 25% of 1000
    df.loc[(df.curve == "B") & (df.load == 16), "recomputed_tokens"] = 250.0      # at the limit: fine
    text = " ".join(caution_text(df).split())
    assert text.startswith("warning: thrashing at 1 point in 2 seed runs (A at 16)")   # two seeds, one load point


def test_a_stacked_text_column_reads_left_aligned_and_a_number_right_aligned():
    """When even a key and one value column do not fit (specsim policies at 30 columns), each row's value goes
    under its key: text indented by two spaces and wrapped (not pushed to the right edge), a number right-aligned."""
    rows = [["trtllm-draft-len-schedule", "TensorRT-LLM draft_len_schedule: drafts per running-request bound"],
            ["mtp1", "1,234.5"]]
    lines = fmt.table(["name", "description"], rows, width=30).splitlines()
    i = lines.index("trtllm-draft-len-schedule")
    assert lines[i + 1].startswith("  TensorRT-LLM") and max(map(len, lines)) <= 30
    assert lines[lines.index("mtp1") + 1] == " " * (30 - len("1,234.5")) + "1,234.5"


def test_the_load_column_says_users_or_rate_scale():
    """A fresh user's sweep with --rate-scales read 'closed loop' in the title and a bare load column."""
    import pandas as pd

    df = pd.DataFrame({"status": "ok", "curve": "none", "seed": 0, "mode": ["closed", "open"], "load": [4.0, 0.5],
                       "mean_tps_per_user": 130.0, "output_throughput_per_gpu": 500.0,
                       "mean_verify_tokens_per_request": 1.0, "mean_acceptance_length": 1.0, "mean_ttft_ms": 50.0,
                       "median_tps_per_user": 130.0})
    text = " ".join(spread_text(df, 200).split())
    assert "4 users" in text and "x0.5" in text and "open loop (x the trace's rate): the whole run" in text
    closed = " ".join(spread_text(df[df["mode"] == "closed"], 200).split())
    assert "curve users seeds" in closed and "closed loop: the measurement window" in closed
