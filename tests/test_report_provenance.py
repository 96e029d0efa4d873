"""The report's provenance table per curve: the no-speculation curve has no acceptance source, and its cell says
so instead of Python's ``None`` (a fresh user's report read "none None")."""

from __future__ import annotations

import re

from conftest import REPO
from helpers import run_cli
from specsim.analysis.report import write_report


def test_the_no_speculation_curve_names_no_acceptance_source(tmp_path):
    out = tmp_path / "s"
    assert run_cli(["sweep", "--trace", str(REPO / "traces" / "prod.jsonl"), "--out", str(out), "--policies",
                    "none,mtp1", "--concurrency", "2", "--num-requests", "8", "--executor", "serial", "--quiet"]) == 0
    page = write_report(out, tmp_path / "r.html", tiers=(50.0,)).path.read_text()
    table = re.findall(r'<table id="curve-sources">(.*?)</table>', page, re.S)[0]
    rows = [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    by_curve = {r[0]: r[1] for r in rows if r}
    assert by_curve["none"] == "- (no speculation: nothing drafted to accept)"
    assert by_curve["mtp1"] == "DeepSeek-V3 report: MTP second-token acceptance 85-90% (0.875)"
    assert "None" not in table
