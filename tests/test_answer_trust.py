"""How far the headline answer ("which policy wins at my SLA, by how much") can be trusted: what the seeds' p-value
tests."""

from __future__ import annotations

from specsim.analysis.frontier import compare
from specsim.analysis.significance import SEEDS_SCOPE, TRAFFIC_TEST, with_seeds_scope


# ----------------------------------------------------------------------- 3. what the seeds' p-value tests
def _three_seeds() -> list[dict]:
    from test_recommend import rec

    return [rec(p, load, seed, x + d, k * load * (1 + d / 100) + (5 + seed if p == "dspark" else 0))
            for seed, d in ((0, -5.0), (1, 0.0), (2, 5.0)) for load, x in ((4, 200.0), (16, 120.0))
            for p, k in (("static", 10), ("dspark", 12))]


def test_recommend_and_the_report_say_what_the_seeds_redraw_where_they_quote_a_p_value():
    from specsim.analysis.report import _decision
    from specsim.sweep.recommend import recommend, recommendations_text

    assert SEEDS_SCOPE == "seeds redraw acceptance on the same trace requests, not the traffic"
    assert with_seeds_scope("one seed") == "one seed" and with_seeds_scope("exact tie") == "exact tie"
    assert with_seeds_scope("holds (p=0.01, 3 seeds)", test=False) == f"holds (p=0.01, 3 seeds); {SEEDS_SCOPE}"
    (r,) = recommend(_three_seeds(), [100.0])
    assert r.margin_verdict.startswith("holds (p=")
    text = " ".join(recommendations_text([r], width=300).split())
    assert f"({r.margin_verdict}; {SEEDS_SCOPE}: {TRAFFIC_TEST})" in text
    page = _decision(compare(_three_seeds(), [100.0]))
    assert f"({r.margin_verdict}; {SEEDS_SCOPE})" in page["rows"][0]["line_end"]
    assert f"({SEEDS_SCOPE}: {TRAFFIC_TEST})" in page["note"]


def test_compares_footnote_words_the_seeds_scope_the_same(tmp_path):
    from specsim.cli.compare_table import compare_text

    text = " ".join(compare_text(compare(_three_seeds(), [100.0]), tmp_path, width=200).split())
    assert f"{SEEDS_SCOPE}: {TRAFFIC_TEST}" in text
