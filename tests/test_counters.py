"""Aggregate per-position acceptance counters (data/SOURCES.md section 3)."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.counters import (RATE_FLOOR, from_counts, from_survival, load_counters, parse_vllm_metrics, rate_table,
                              read_counters_csv)
from specsim.errors import SpecsimInputError


def test_vllm_published_counters(shared):
    csv = shared / "data" / "spec_acceptance" / "vllm_eagle3_mtbench_acceptance_per_pos.csv"
    rows = read_counters_csv(csv)
    assert len(rows) == 5
    llama = rows[0]
    assert llama.name == "llama3-8b-eagle3" and llama.num_spec_tokens == 3
    # 0.7296, 0.5208 / 0.7296, 0.3545 / 0.5208 (SOURCES.md: 0.7296, 0.714, 0.681)
    assert np.allclose(llama.conditional, [0.7296, 0.714, 0.681], atol=5e-4)
    assert llama.mean_acceptance_length == pytest.approx(1 + 0.7296 + 0.5208 + 0.3545)
    assert llama.mean_acceptance_length == pytest.approx(2.60, abs=0.01)
    for c in rows:                      # vLLM's own reported figure agrees with 1 + sum s_k
        if c.reported_mean_acceptance_length is not None:
            assert c.mean_acceptance_length == pytest.approx(c.reported_mean_acceptance_length, abs=0.015)


def test_counts_give_the_closed_form():
    # 1000 fixed-length drafts of 4: accepted at pos 1..4 = 800, 600, 300, 150
    c = from_counts(1000, [800, 600, 300, 150], num_draft_tokens=4000)
    assert np.allclose(c.survival, [0.8, 0.6, 0.3, 0.15])
    assert np.allclose(c.conditional, [0.8, 0.75, 0.5, 0.5])
    assert c.mean_acceptance_length == pytest.approx(2.85)
    assert c.acceptance_rate == pytest.approx(1850 / 4000)
    # a zero survival leaves the later conditional rates undefined, not zero
    z = from_survival([0.5, 0.0, 0.0])
    assert z.conditional[1] == 0.0 and np.isnan(z.conditional[2])


def test_adaptive_counters_are_rejected():
    with pytest.raises(SpecsimInputError, match="adaptive"):
        from_counts(1000, [800, 600, 300], num_draft_tokens=2500)      # not every step drafted 3
    with pytest.raises(SpecsimInputError, match="adaptive"):
        from_counts(1000, [800, 600, 300], drafts_per_pos=[1000, 900, 700])
    with pytest.raises(SpecsimInputError, match="adaptive") as e:
        from_survival([0.6, 0.4, 0.45], source="c.csv", line=3)         # rising survival
    assert "c.csv, line 3" in str(e.value) and "position 3" in str(e.value)
    with pytest.raises(SpecsimInputError):
        from_counts(100, [120, 50])                                     # more accepted than drafts
    assert from_counts(1000, [800, 600, 300], num_draft_tokens=2990, rel_tol=0.01).num_drafts == 1000


def test_csv_with_raw_counts_and_adaptive_row(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("config_id,num_spec_tokens,num_drafts,num_draft_tokens,accepted_tokens_pos1,"
                    "accepted_tokens_pos2\nfixed,2,200,400,150,90\nadaptive,2,200,330,150,90\n")
    with pytest.raises(SpecsimInputError) as e:
        read_counters_csv(path)
    assert "line 3" in str(e.value) and "num_draft_tokens" in str(e.value)
    path.write_text(path.read_text().splitlines()[0] + "\nfixed,2,200,400,150,90\n")
    (c,) = read_counters_csv(path)
    assert np.allclose(c.conditional, [0.75, 0.6]) and c.num_drafts == 200


PROM = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 600.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 400.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1800.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 1200.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1000.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 450.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 250.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 300.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 200.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 200.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 100.0
"""


def test_vllm_prometheus_dump():
    c = parse_vllm_metrics(PROM, model_name="m")
    assert c.num_drafts == 1000
    assert np.allclose(c.survival, [0.7, 0.5, 0.3])
    assert np.allclose(c.conditional, [0.7, 0.5 / 0.7, 0.6])
    assert c.mean_acceptance_length == pytest.approx(2.5)
    adaptive = PROM.replace('engine="1",model_name="m"} 1200.0', 'engine="1",model_name="m"} 900.0')
    with pytest.raises(SpecsimInputError, match="adaptive"):
        parse_vllm_metrics(adaptive)
    with pytest.raises(SpecsimInputError):
        parse_vllm_metrics("vllm:num_requests_running 3\n")


def test_load_counters_by_suffix_and_rate_table(tmp_path):
    dump = tmp_path / "metrics.txt"
    dump.write_text(PROM)
    got = load_counters(dump, domain="code")
    assert list(got) == ["code"] and np.allclose(got["code"].survival, [0.7, 0.5, 0.3])
    t = rate_table({"code": got["code"], "z": from_survival([0.5, 0.0, 0.0]), "one": from_survival([1.0, 0.9])},
                   source="metrics.txt")
    assert t["alpha"]["code"] == [0.7, round(0.5 / 0.7, 6), 0.6]
    assert t["alpha"]["z"] == [0.5, RATE_FLOOR, RATE_FLOOR]          # 0 and NaN (after a zero) to the floor
    assert t["alpha"]["one"] == [1 - RATE_FLOOR, 0.9]                # 1 is not a usable latent-model rate
    assert t["mean_acceptance_length"] == {"code": pytest.approx(2.5), "z": 1.5, "one": pytest.approx(2.9)}
    assert t["source"] == "metrics.txt" and "s_k / s_(k-1)" in t["method"]
    with pytest.raises(SpecsimInputError, match="No such file"):
        load_counters(tmp_path / "missing.txt")
    csv = tmp_path / "c.CSV"
    csv.write_text("config_id,num_spec_tokens,frac_drafts_accepting_pos1\nx,1,0.4\ny,1,0.3\n")
    assert list(load_counters(csv, configs=["y"])) == ["y"]
    with pytest.raises(SpecsimInputError, match="at least one configuration"):
        load_counters(csv, configs=["nope"])


def run_cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    import sys

    from specsim.cli import main
    monkeypatch.setattr(sys, "argv", ["specsim", *args])
    with pytest.raises(SystemExit) as ei:
        main()
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


def test_cli_reports_acceptance_rate(tmp_path, monkeypatch, capsys):
    # 1000 fixed-length drafts of 3: accepted 700, 500, 300 -> length 1 + 1.5 = 2.5, rate 1500 / 3000 = 0.5
    dump = tmp_path / "metrics.txt"
    dump.write_text(PROM)
    out = tmp_path / "t.json"
    rc, stdout, err = run_cli(monkeypatch, capsys, "counters", str(dump), "--out", str(out), "--domain", "code")
    assert rc == 0, err
    text = " ".join(stdout.split())
    assert "code: 0.700 0.714 0.600 (tau 2.500) acceptance rate 0.500" in text
    assert "tau = acceptance length" in text and "acceptance rate = accepted / drafted tokens" in text
    import json
    table = json.loads(out.read_text())
    assert table["acceptance_rate"] == {"code": pytest.approx(0.5)}
    assert table["mean_acceptance_length"] == {"code": pytest.approx(2.5)}


@pytest.mark.parametrize("name,text,words", [
    ("c.json", '{"num_drafts": 10, "accepted": [5, 3]}', ["JSON, which is not a supported input", "counters CSV",
                                                          "Prometheus /metrics"]),
    ("m.txt", "vllm:num_requests_running 3\n", ["no vllm:spec_decode_* counter samples", "counters CSV"]),
    ("m.txt", PROM.replace('position="1"', 'position="5"'), ["positions 0, 2, 5", "0..K-1"]),
    ("m.txt", PROM.replace("450.0", "NaN"), ["line 8", "finite number"]),
    ("m.txt", PROM.replace('position="2"', 'position="x"'), ["line 12", "position"]),
    ("c.csv", "config_id,num_spec_tokens,frac_drafts_accepting_pos1\nx,one,0.4\n", ["line 2", "num_spec_tokens"]),
    ("c.csv", "config_id,num_spec_tokens,frac_drafts_accepting_pos1\nx,2,0.4\n", ["line 2", "position 2"]),
    ("c.csv", "config_id,num_spec_tokens,frac_drafts_accepting_pos1\nx,1,abc\n", ["line 2", "'abc'"]),
    ("c.csv", "config_id,num_spec_tokens,frac_drafts_accepting_pos1\n", ["only a header"]),
    ("c.csv", "", ["counters CSV"]),
])
def test_cli_counters_errors_are_one_plain_line(tmp_path, monkeypatch, capsys, name, text, words):
    p = tmp_path / name
    p.write_text(text)
    rc, stdout, err = run_cli(monkeypatch, capsys, "counters", str(p), "--out", str(tmp_path / "t.json"))
    assert rc == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err, (w, err)
    assert "np.float64" not in err and "positions []" not in err
