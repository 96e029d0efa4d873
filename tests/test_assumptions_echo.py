"""What an operator reviewing the bundled B200 scenario (MTP k = 2 and DSpark k = 7 against no speculation) could not
read in the output: the acceptance length given beside the one simulated, and which drafter and gamma a curve ran
(both curves were labelled ``static``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specsim.analysis.sweep_tables import DEFAULT_KNOBS, OWN_KNOBS, curve_title, results_frame
from specsim.run_notices import LENGTH_TOLERANCE, acceptance_length_text
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import save_trace, synth_trace

ROOT = Path(__file__).resolve().parents[1]
B200 = ROOT / "specsim" / "scenarios" / "b200-qwen3.8-27b-vllm.toml"
GIVEN = ["acceptance.length=3.43", "acceptance.length_gamma=7"]
EXACT = ["acceptance.sigma_request=0", "acceptance.sigma_step=0", "acceptance.sigma_token=0"]


def _cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    from specsim.cli import main
    monkeypatch.setattr(sys, "argv", ["specsim", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as ei:
        main()
        sys.exit(0)
    out = capsys.readouterr()
    return ei.value.code, out.out, " ".join(out.err.split())


def test_the_policy_defaults_the_labels_compare_against_are_the_resolvers():
    from specsim.policies.registry import available_policies
    from specsim.run_config import resolve_policy

    sc = load_scenario()
    for p in available_policies():
        c = resolve_policy(p, sc, None, None, {}, ())
        assert (c.gamma, c.drafter) == OWN_KNOBS.get(p, DEFAULT_KNOBS), p


def test_a_curve_title_names_a_drafter_or_gamma_other_than_the_policys():
    assert curve_title("static", "static", 2, "mtp") == "static (gamma=2, drafter=mtp)"
    assert curve_title("static", "static", 7, "dspark") == "static"
    assert curve_title("static", "static", 7, "eagle3") == "static (gamma=7, drafter=eagle3)"
    assert curve_title("mtp1", "mtp1", 1, "mtp") == "mtp1" and curve_title("none", "none", 0, "none") == "none"
    # a label that already names its knobs (a policy swept at several) is left as it is
    assert curve_title("static drafter=mtp gamma=2", "static", 2, "mtp") == "static drafter=mtp gamma=2"


def test_the_length_text_by_hand():
    # alpha solved at gamma 7 from 3.43 carries to gamma 2 as 1 + a + a^2
    from specsim.acceptance.model import alpha_for_acceptance_length

    a = alpha_for_acceptance_length(3.43, 7)
    text = acceptance_length_text(3.43, 7, 2, [1 + a + a * a], "static", (0.0, 0.0, 0.0))
    assert text == (f"acceptance length: given 3.43 (acceptance.length at gamma 7: alpha {a:.3f} per position), "
                    f"simulated {1 + a + a * a:.3f}; at this run's gamma 2 that alpha gives {1 + a + a * a:.3f} "
                    f"(within {LENGTH_TOLERANCE:.0%})")
    off = acceptance_length_text(3.43, 7, 7, [3.381, 3.36], "dspark", (1.03, 0.89, 1.16), " of dspark")
    assert off.startswith("acceptance length of dspark: given 3.43 (acceptance.length at gamma 7: alpha 0.733 per "
                          "position), simulated 3.360-3.381 over 2 points; -2.0%, beyond 1%: the acceptance model")
    assert "(acceptance.sigma_request 1.03, sigma_step 0.89, sigma_token 1.16" in off and "averages below" in off
    assert "policy dspark verifies fewer than gamma drafts at some steps" in off
    assert "policy" not in acceptance_length_text(3.43, 7, 7, [3.2], "static", (1.0, 0.0, 0.0))


def test_a_run_prints_the_length_given_beside_the_one_simulated():
    tr = synth_trace(48, 1.0, seed=0, prompt_len=191, output_len=761)
    sc = load_scenario(B200, GIVEN)
    s = simulate(tr, "static", sc, seed=0, concurrency=8, gamma=7, drafter="dspark").summary
    notes = " ".join(s["profile_range"]["notices"])
    sim, win = s["mean_acceptance_length"], s["window"]["mean_acceptance_length"]
    assert (f"acceptance length: given 3.43 (acceptance.length at gamma 7: alpha 0.733 per position), simulated "
            f"{sim:.3f} over the whole run ({win:.3f} in the measurement window); ") in notes
    assert sim < 3.43 * (1 - LENGTH_TOLERANCE) and "sigma_request 1.03" in notes       # the spread: named
    exact = simulate(tr, "static", load_scenario(B200, GIVEN + EXACT), seed=0, concurrency=8, gamma=7,
                     drafter="dspark").summary
    notes = " ".join(exact["profile_range"]["notices"])
    assert abs(exact["mean_acceptance_length"] / 3.43 - 1) < 0.03 and "sigma_request" not in notes
    none = simulate(tr, "none", sc, seed=0, concurrency=8).summary
    assert "acceptance length" not in " ".join(none["profile_range"].get("notices", []))


def test_a_sweep_labels_a_curve_by_its_drafter_and_gamma_and_echoes_the_length(tmp_path, monkeypatch, capsys):
    """Two folders of static, MTP k = 2 and DSpark k = 7: the sweep's table, its acceptance note, the plot's legend
    and the report name MTP's curve ``static (gamma=2, drafter=mtp)``; DSpark k = 7 is static's default."""
    from specsim.analysis.plots import frontier_figure
    from specsim.analysis.report import write_report
    from specsim.analysis.sweep_records import load_records

    trace = tmp_path / "he.jsonl"
    save_trace(synth_trace(32, 1.0, seed=0, prompt_len=191, output_len=300), trace)
    common = ["sweep", "--scenario", str(B200), "--trace", str(trace), "--concurrency", "4,8"]
    rc, out, err = _cli(monkeypatch, capsys, *common, "--policies", "static", "--drafter", "mtp", "--gamma", "2",
                        "--out", str(tmp_path / "mtp"), "--set", "acceptance.length=2.27",
                        "--set", "acceptance.length_gamma=2")
    assert rc == 0, err
    assert "static (gamma=2, drafter=mtp)  4" in out
    values = results_frame(load_records(tmp_path / "mtp")).mean_acceptance_length
    assert (f"note: acceptance length of static (gamma=2, drafter=mtp): given 2.27 (acceptance.length at gamma 2: "
            f"alpha 0.733 per position), simulated {values.min():.3f}-{values.max():.3f} over 2 points") in err
    rc, out, err = _cli(monkeypatch, capsys, *common, "--policies", "static", "--out", str(tmp_path / "ds"))
    assert rc == 0 and "\nstatic  " in out and "(gamma=" not in out and "note: acceptance length of" not in err
    fig = frontier_figure([str(tmp_path / "mtp"), str(tmp_path / "ds")])
    assert [ax.get_legend_handles_labels()[1][0] for ax in fig.axes[:2]] == ["static (gamma=2, drafter=mtp)",
                                                                            "static"]
    html = write_report(tmp_path / "mtp", tmp_path / "r.html").path.read_text()
    assert ">static (gamma=2, drafter=mtp)<" in html


def test_the_admission_limit_names_which_limit_and_its_cap():
    from specsim.analysis.sweep_tables import admission_limit

    assert admission_limit(77, 6344, 1024, 77.0) == "the KV pool full: at most 77 requests at once"
    assert admission_limit(568, 6344, 100, 100.0) == "max_num_seqs full: at most 100 requests at once"
    # a pool of tokens alone: max_num_seqs where the running count reached it, else the pool's tokens
    assert admission_limit(None, 50000, 256, 255.0) == "max_num_seqs full: at most 256 requests at once"
    assert admission_limit(None, 50000, 256, 90.0) == "the KV pool full (50,000 tokens)"
    assert admission_limit(None, None, None, 90.0) == "the KV pool or max_num_seqs full"      # older records


def test_sweep_compare_and_recommend_name_each_policys_admission_limit(tmp_path, monkeypatch, capsys):
    """On the B200 scenario the run header gave the per-policy cap (77 DSpark k = 7, 568 none) while sweep and
    compare said "the KV pool or max_num_seqs full": with max_num_seqs 100, DSpark's pool binds and none's
    max_num_seqs does, each named with its cap."""

    trace = tmp_path / "t.jsonl"
    save_trace(synth_trace(400, 1.0, seed=0, prompt_len=191, output_len=300), trace)
    out = tmp_path / "q"
    rc, text, _ = _cli(monkeypatch, capsys, "sweep", "--scenario", str(B200), "--trace", str(trace), "--policies",
                      "static,none", "--concurrency", "128", "--out", str(out), "--set", "cluster.max_num_seqs=100")
    caps = {}
    for policy in ("static", "none"):
        s = simulate(synth_trace(200, 1.0, seed=0, prompt_len=191, output_len=300), policy,
                     load_scenario(B200, ["cluster.max_num_seqs=100"]), seed=0, concurrency=16).summary
        caps[policy] = s["kv_capacity"]["max_requests"]
        assert f"so at most {caps[policy]:,} requests of up to" in s["kv_capacity"]["describe"]
    assert caps["static"] < 100 < caps["none"]
    said = (f"(none: max_num_seqs full: at most 100 requests at once; static: the KV pool full: at most "
            f"{caps['static']} requests at once)")
    assert rc == 0 and said in " ".join(text.split())                  # the warnings: on stdout
    rc, text, _ = _cli(monkeypatch, capsys, "compare", str(out))
    assert rc == 0 and said in " ".join(text.split())
    rc, text, _ = _cli(monkeypatch, capsys, "recommend", str(out), "--tiers", "20")
    assert rc == 0 and "to be admitted, " in " ".join(text.split())
    assert ("max_num_seqs full: at most 100 requests at once" in " ".join(text.split())
            or f"the KV pool full: at most {caps['static']} requests at once" in " ".join(text.split()))
