"""``specsim replay`` end to end on the bundled tiny target (issue 7).

A small trace (8 requests over chat, code and math, a few dozen engine iterations) is served with real
models under ``dspark``; the simulator predicts it with an acceptance model fitted from a second run
(``static``, another seed) and the target profile measured in the same call. Asserted: the comparison
table is complete and finite, the predicted acceptance length is within 10% of the measured one, and
the replay's own records are consistent (tokens conserved, step-log rows = decode steps).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

if os.environ.get("CI", "").lower() == "true" and os.environ.get("SPECSIM_TORCH_PHASE") == "1":
    import torch  # noqa: F401  (the torch phase of .ci/run: a missing torch is a failure, never a skip)
else:
    torch = pytest.importorskip("torch")

from specsim.backends.torch.replay import COMPARED, compare, domain_prompts, math_problems, run_replay  # noqa: E402
from specsim.errors import SpecsimInputError  # noqa: E402
from specsim.workload.trace import Trace  # noqa: E402


def _trace(n: int = 6, output_base: int = 80) -> Trace:
    doms = ["chat", "code", "math"] * n
    return Trace(request_id=[str(i) for i in range(n)], arrival_s=0.004 * np.arange(n),
                 prompt_tokens=[40 + 4 * i for i in range(n)],
                 output_tokens=[output_base + 4 * i for i in range(n)], domain=doms[:n], source="<test>")


def test_math_problems_are_correct_arithmetic():
    text = math_problems(np.random.default_rng(0), 400)
    assert len(text) >= 400
    for line in text.splitlines():
        if line.startswith("Answer: "):
            expr, result = line[len("Answer: "):].split(" = ")
            a, rest = expr.split(" + ")
            b, rest = rest.split(" * ")
            c, d = rest.split(" - ")
            assert int(a) + int(b) * int(c) - int(d) == int(result.split(".")[0])


def test_prompts_have_exact_lengths_and_refuse_unknown_domains():
    from specsim.backends.torch.workflow import load_target
    target = load_target("tiny")
    tr = _trace(3)
    prompts = domain_prompts(target, tr, seed=0)
    assert [len(p) for p in prompts] == list(tr.prompt_tokens)
    assert "Question:" in target.decode(prompts[2]) or "Answer:" in target.decode(prompts[2])
    bad = Trace(request_id=["0"], arrival_s=[0.0], prompt_tokens=[8], output_tokens=[4], domain=["legal"])
    with pytest.raises(SpecsimInputError, match="domain"):
        domain_prompts(target, bad, seed=0)


def test_compare_relative_errors():
    table = compare({"mean_acceptance_length": 2.0, "output_throughput": 100.0},
                    {"mean_acceptance_length": 2.1, "output_throughput": 90.0})
    rel = dict(zip(table.metric, table.rel_error))
    assert rel["mean_acceptance_length"] == pytest.approx(0.05)
    assert rel["output_throughput"] == pytest.approx(-0.10)
    assert math.isnan(rel["acceptance_rate"])          # missing on both sides: no number invented


def test_fitting_on_the_run_being_predicted_is_refused(tmp_path):
    with pytest.raises(SpecsimInputError, match="never fit on the run being predicted"):
        run_replay(_trace(2), "dspark", tmp_path, fit_seed=0, fit_policy="dspark", seed=0)
    with pytest.raises(SpecsimInputError, match="exactly one"):
        run_replay(_trace(2), "dspark", tmp_path, seed=0)


def test_replay_end_to_end_small(tmp_path):
    # ~2,500 output tokens: the acceptance-length comparison of two sampled runs then has a standard error
    # of about 2.5%, so the 10% bound below sits at about 4 standard errors
    tr = _trace(12, output_base=180)
    served = []
    rep = run_replay(tr, "dspark", tmp_path, fit_seed=2, fit_policy="static", seed=0, max_batch=8,
                     fit_max_evals=20, served=lambda *a: served.append(a))
    # progress (issue 22): both real-model runs counted towards one total, each request once, in order
    assert served[0] == (0, 24, "") and served[-1] == (24, 24, "fitting run: static, seed 2")
    assert [d for d, *_ in served] == sorted({d for d, *_ in served}) and {t for _, t, _ in served} == {24}
    assert served[[d for d, *_ in served].index(12)][2] == "dspark, seed 0"
    table = pd.read_csv(tmp_path / "comparison.csv")
    assert list(table.metric) == [k for k, _ in COMPARED]
    for col in ("measured", "predicted", "rel_error", "predicted_calibrated", "rel_error_calibrated"):
        assert np.isfinite(table[col].to_numpy(float)).all(), col
    row = table.set_index("metric").loc["mean_acceptance_length"]
    assert abs(row.rel_error) <= 0.10, table.to_string()
    # the replay's own records: every request emitted exactly its output length
    req = pd.read_parquet(tmp_path / "replay" / "requests.parquet")
    assert (req.accepted_drafts + req.decode_steps + 1 == req.output_tokens).all()
    log = pd.read_parquet(tmp_path / "replay" / "step_log.parquet")
    assert len(log) == int(req.decode_steps.sum())
    steps = pd.read_parquet(tmp_path / "replay" / "steps.parquet")
    assert 20 <= len(steps) <= 1000                      # a few hundred engine iterations at most
    assert (log.verify_len <= log.gamma).all() and (log.num_accepted <= log.verify_len).all()
    # the fit came from the other run: its blocks are that run's (static: every position verified)
    fit = json.loads((tmp_path / "fit" / "model.json").read_text())
    assert fit["source"] == ["fit_run (policy static, seed 2)"]
    assert rep["comparison"][0]["metric"] == "mean_acceptance_length"

