"""Build the notebooks of this folder from the cell sources below (outputs stripped).

    python notebooks/build.py          # rewrites notebooks/*.ipynb

The notebooks are generated so they stay reproducible and reviewable as code; edit the cells here, not in
Jupyter, then rebuild. ``tests/test_notebooks.py`` executes every notebook headless and checks that the
committed files equal what this script builds. Each notebook uses a small configuration (seconds to run)
and asserts what it computes, so a broken notebook fails the tests.

The committed notebooks carry no outputs, so a figure typed into a markdown cell goes stale unseen: prose
states no number a cell computes; a cell prints it (and asserts what the prose claims of it). A "same from the
shell" cell runs its commands (``shell`` below) and asserts the shell's result is the notebook's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = '''%matplotlib inline
from pathlib import Path
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()   # the repository root
pd.set_option("display.width", 160)'''

#: A notebook's "same from the shell" cell runs its commands with this helper, so the claim is checked each run.
SHELL = '''import json, shlex, subprocess, sys, tempfile

def shell(line, cwd):
    """Run one `specsim ...` command line in folder `cwd` as a shell would, with this kernel's Python
    (`python -m specsim` is the `specsim` command); returns what it printed on stdout."""
    print("$", line)
    args = shlex.split(line)
    assert args[0] == "specsim", line
    done = subprocess.run([sys.executable, "-m", "specsim", *args[1:]], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{line!r} failed:\\n{done.stderr}")
    return done.stdout'''

QUICKSTART = [
    ("md", """# 01 Quickstart: one simulation from Python

`specsim run` is a thin layer over `specsim.simulation.simulate`. Here we simulate one H100 serving
Llama-2-7B with a DSpark drafter (the bundled default scenario) under the `dspark` policy, read the
metrics as DataFrames, and plot per-request decode speed (TPS/user) and the per-step verification
budget. The trace is synthetic and small (64 requests, short prompts) so the notebook runs in seconds."""),
    ("code", SETUP),
    ("code", '''from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import synth_trace

trace = synth_trace(64, rate=20.0, mix="chat=0.4,code=0.3,math=0.3", seed=0,
                    max_prompt_tokens=256, max_output_tokens=192)
scenario = load_scenario()            # specsim/scenarios/default.toml; load_scenario(path, ["a.b=v"]) overrides
result = simulate(trace, "dspark", scenario, concurrency=16, seed=0)   # closed loop, 16 users
trace.to_frame().head()'''),
    ("md", """`result.summary` is the flat metrics dict `specsim run --json` prints (names follow
`vllm bench serve`; whole-run figures, and in closed loop a `window` block with the measurement window's);
`result.requests` has one row per request and `result.steps` one row per engine step."""),
    ("code", '''s = result.summary
keys = ["completed", "output_throughput_per_gpu", "mean_ttft_ms", "mean_tpot_ms", "mean_tps_per_user",
        "mean_acceptance_length", "acceptance_rate", "mean_verify_tokens_per_request", "steps"]
summary = pd.Series({k: s[k] for k in keys})
summary'''),
    ("code", '''req, steps = result.requests, result.steps
req[["request_id", "domain", "prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "tps_per_user",
     "decode_steps", "verified_drafts", "accepted_drafts"]].head()'''),
    ("md", """Checks on what we just computed: every request completed; each request emitted exactly its
output tokens (one from prefill, then accepted drafts + 1 per decode step); TPS/user is 1 / TPOT; and the
summary's verify budget is the step records' verified tokens per running request, over the steps that
end inside the closed-loop measurement window (it opens once every user has finished one request and
closes when the last trace request is issued)."""),
    ("code", '''done = req[req.status == "completed"]
assert s["completed"] == len(trace) == len(done)
np.testing.assert_array_equal(done.accepted_drafts + done.decode_steps + 1, done.output_tokens)
multi = done[done.output_tokens > 1]
np.testing.assert_allclose(multi.tps_per_user, 1.0 / multi.tpot_s)
decode = steps[steps.num_decode > 0]
budget = decode.batch_tokens / decode.num_decode             # 1 + mean l_r at each step
w0, w1 = s["load"]["window_start_s"], s["load"]["window_end_s"]
end = decode.start_s + decode.duration_s
win = decode[(end > w0) & (end <= w1)]
assert np.isclose(win.batch_tokens.sum() / win.num_decode.sum(), s["window"]["mean_verify_tokens_per_request"])
assert 1.0 <= budget.min() and budget.max() <= 1 + s["gamma"]
print(f"{len(decode)} decode steps, budget {budget.min():.2f}..{budget.max():.2f} tokens per request")'''),
    ("code", '''fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for dom, sub in multi.groupby("domain"):
    ax1.hist(sub.tps_per_user, bins=15, alpha=0.6, label=dom)
ax1.set(xlabel="TPS/user (tok/s)", ylabel="requests", title="per-request decode speed")
ax1.legend()
ax2.plot(decode.start_s, budget, lw=0.6, color="tab:blue", label="per step")
ax2.plot(decode.start_s, budget.rolling(50, min_periods=1).mean(), color="k", label="rolling mean (50 steps)")
running = ax2.twinx()
running.plot(decode.start_s, decode.num_decode, color="tab:orange", lw=0.8, alpha=0.6)
running.set_ylabel("running requests", color="tab:orange")
ax2.set(xlabel="simulated time (s)", ylabel="verify tokens per request (1 + l_r)",
        title="dspark's per-step verify budget (orange: running requests)")
ax2.legend(loc="lower left")
plt.tight_layout()'''),
    ("md", """The same run from the shell: `specsim trace synth` draws the same trace (the same arguments and
seed give the same requests, byte for byte) and `specsim run` simulates it with the same policy, scenario (the
bundled default), users and seed. The cell below runs both commands and checks that the shell's summary is this
notebook's, figure for figure. (`specsim run --trace traces/prod.jsonl` instead replays the bundled
production-like trace, 3,000 requests of longer prompts and outputs: another workload, other numbers.)"""),
    ("code", SHELL),
    ("code", '''work = Path(tempfile.mkdtemp(prefix="specsim-shell-"))
shell("specsim trace synth --num-requests 64 --rate 20 --mix chat=0.4,code=0.3,math=0.3 --seed 0 "
      "--max-prompt 256 --max-output 192 --out nb01.jsonl", work)
cli = json.loads(shell("specsim run --policy dspark --trace nb01.jsonl --concurrency 16 --seed 0 --json", work))
assert all(cli[k] == s[k] for k in keys), {k: (cli[k], s[k]) for k in keys}
print(f"the shell's run is this one: {cli['completed']} requests, {cli['output_throughput_per_gpu']:,.1f} "
      f"tok/s/GPU, {cli['mean_tps_per_user']:.1f} tok/s/user")'''),
    ("md", """Next: `02_policy_frontiers.ipynb` compares policies over load levels."""),
]

FRONTIERS = [
    ("md", """# 02 Policy frontiers: a small sweep, Pareto frontiers, SLA tiers

A sweep runs every (policy, load, seed) point; `specsim.analysis.frontier` turns the points into Pareto
frontiers of (TPS/user, throughput per GPU) and compares the policies at SLA tiers (a TPS/user target).
The scenario is chosen to be compute-bound enough for the verification budget to matter: one A100
serving Llama-2-7B (`a100-llama2-7b-tp1`, step time 10 ms at 64 tokens, 35 ms at 512) with an
EAGLE-3-style drafter, and two disaggregated prefill instances beside the decode GPU
(`prefill.num_instances=2`): with the default one, requests at 64 users wait for prefill most of their TTFT,
so those points measure the prefill queue, not the policy (the end of this notebook shows what specsim then
says). Three loads, one seed, short requests: seconds of simulation."""),
    ("code", SETUP),
    ("code", '''import tempfile
from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, run_sweep, load_records, results_frame
from specsim.analysis.frontier import compare, frontiers, budget_curve
from specsim.analysis.sweep_tables import cautions
from specsim.sweep import seed_spread
from specsim.workload import synth_trace

OVERRIDES = ["profile.name=a100-llama2-7b-tp1", "drafter.name=eagle3", "prefill.num_instances=2"]
scenario = load_scenario(None, OVERRIDES)
trace = synth_trace(400, rate=20.0, mix="chat=0.4,code=0.3,math=0.3", seed=0,
                    max_prompt_tokens=256, max_output_tokens=160)
spec = SweepSpec(policies=("static", "dspark", "dspark-async"), concurrency=(4, 16, 64),
                 num_requests=32, requests_per_user=6)
out_dir = Path(tempfile.mkdtemp(prefix="specsim-sweep-"))
outcome = run_sweep(spec, scenario, trace, out_dir, executor="serial", progress=False)
records = load_records(out_dir)
assert not outcome.failed and len(records) == 9
df = results_frame(records)
df["prefill_wait_share"] = df.mean_prefill_wait_ms / df.mean_ttft_ms    # > 0.5: prefill-bound
assert cautions(df) == []          # no point thrashes, is prefill- or think-bound or overloaded
df[["curve", "load", "mean_tps_per_user", "output_throughput_per_gpu", "mean_verify_tokens_per_request",
    "prefill_wait_share"]].round(3)'''),
    ("md", """`cautions(df)` is empty: no point is flagged (thrashing, prefill- or think-bound, overloaded), so
every point measures the policies. Each curve's frontier keeps its non-dominated load points; between them
throughput is interpolated linearly in TPS/user (docs/sweeps.md)."""),
    ("code", '''fr = frontiers(seed_spread(df))
fig, ax = plt.subplots(figsize=(6.5, 4.5))
for curve, f in fr.items():
    sub = df[df.curve == curve]
    line, = ax.plot(f.tps_per_user, f.throughput_per_gpu, "-o", label=curve)
    ax.plot(sub.mean_tps_per_user, sub.output_throughput_per_gpu, "x", color=line.get_color())
TIERS = [170.0, 200.0]
tps = df.pivot(index="load", columns="curve", values="mean_tps_per_user")
# every curve's 16-user point is faster than both tiers and its 64-user point slower: each tier is read on the
# frontier between two simulated loads
assert (tps.loc[16.0] > max(TIERS)).all() and (tps.loc[64.0] < min(TIERS)).all()
print("TPS/user at 16 users:", tps.loc[16.0].round(1).to_dict(), "| at 64:", tps.loc[64.0].round(1).to_dict())
for t in TIERS:
    ax.axvline(t, ls=":", color="0.5")
ax.set(xlabel="TPS/user (tok/s)", ylabel="output throughput per GPU (tok/s)", title="Pareto frontiers")
ax.legend()
# a frontier is sorted by TPS/user with strictly decreasing throughput
for f in fr.values():
    assert np.all(np.diff(f.tps_per_user) > 0) and np.all(np.diff(f.throughput_per_gpu) < 0)'''),
    ("md", """The SLA-tier table: throughput per GPU at each tier, the gain over `static`, the winner with its
lead over the runner-up, the caution columns (a winner, or its lead, read from a flagged point: empty here),
the best goodput (throughput from requests meeting the tier) and `advice` (where more loads would sharpen the
answer). `table.attrs["warnings"]` holds the lines `specsim compare` prints under its table: read them before
the numbers."""),
    ("code", '''table = compare(records, TIERS, baseline="static")
cols = ["tier", "curve", "throughput_per_gpu", "gain_vs_baseline", "winner", "margin", "margin_verdict", "caution",
        "runner_up_caution", "baseline_caution", "best_goodput_per_gpu", "best_goodput_load", "attainment_at_best",
        "advice"]
for line in table.attrs["warnings"]:
    print(line)
assert not table[["caution", "runner_up_caution", "baseline_caution"]].astype(bool).any().any()
assert not any("prefill-bound" in w or "thrash" in w for w in table.attrs["warnings"])
table[cols].round(3)'''),
    ("md", """What the warnings say here: no figure is read from a flagged point, but each tier is *met by the
mean*: the winner's TPS/user at the tier is a mean over requests, and only part of its requests run that
fast (the warning gives the share at the winner's point; `attainment_at_best` at the best-goodput load); lighter
loads, or a lower tier, get 90% of them there. What the numbers
say, printed from this run: DSpark's hardware-aware budget beats verifying all gamma drafts at both tiers, its
verify budget falling with load while static verifies every draft, and the asynchronous variant, which also
hides the host overhead, gains more. Every drafting step also pays speculation's own overhead (this plain A100
table states none, so the run charges vLLM issue 49548's sourced defaults: 0.78 ms + 0.084 ms per running
request, about 6 ms of a step at 64 users; docs/profiles.md); DSpark prices it into every step, so it trims
less at load than it would on the target's step time alone."""),
    ("code", '''at = table.set_index(["tier", "curve"])
for t in TIERS:
    print(f"at {t:g} tok/s/user: " + ", ".join(
        f"{c} {at.throughput_per_gpu[(t, c)]:,.0f} tok/s/GPU ({at.gain_vs_baseline[(t, c)]:+.1%} over static)"
        for c in ("dspark", "dspark-async")))
    assert at.throughput_per_gpu[(t, "dspark-async")] > at.throughput_per_gpu[(t, "dspark")] \\
        > at.throughput_per_gpu[(t, "static")], t
assert at.gain_vs_baseline[(170.0, "dspark")] > 0.05
budget = budget_curve(records).pivot(index="load", columns="curve",
                                     values="mean_verify_tokens_per_request_mean")
assert budget["dspark"].is_monotonic_decreasing and budget["static"].min() > 7.5
print(f"dspark's verify budget: {budget.dspark.iloc[0]:.2f} tokens per request at {budget.index[0]:g} users, "
      f"{budget.dspark.iloc[-1]:.2f} at {budget.index[-1]:g}; static's {budget.static.min():.2f} or more")
budget.round(2)'''),
    ("md", """The same sweep from the shell: `specsim trace synth` draws the same trace, then `specsim sweep`,
and `specsim compare` prints the table above with its warnings (`specsim plot DIR` draws the frontiers). The
cell runs them and checks that the shell's tier table is this notebook's."""),
    ("code", SHELL),
    ("code", '''work = Path(tempfile.mkdtemp(prefix="specsim-shell-"))
shell("specsim trace synth --num-requests 400 --rate 20 --mix chat=0.4,code=0.3,math=0.3 --seed 0 "
      "--max-prompt 256 --max-output 160 --out nb02.jsonl", work)
shell("specsim sweep --trace nb02.jsonl --out runs/nb02 --policies static,dspark,dspark-async "
      "--concurrency 4,16,64 --num-requests 32 --requests-per-user 6 --set profile.name=a100-llama2-7b-tp1 "
      "--drafter eagle3 --set prefill.num_instances=2", work)
cli = json.loads(shell("specsim compare runs/nb02 --tiers 170,200 --baseline static --json", work))
got = {(r["tier"], r["curve"]): r["throughput_per_gpu"] for r in cli["table"]}
assert got.keys() == set(at.index)
assert all(np.isclose(got[k], at.throughput_per_gpu[k], rtol=1e-9) for k in got)
print(f"the shell's {len(got)} tier figures are this notebook's")'''),
    ("md", """When the warnings matter: the same sweep with the default scenario's one prefill instance. At 64
users requests now wait for prefill more than half of their TTFT: specsim flags those points prefill-bound, the plot crosses
them out, and the caution columns name the winner and the leads read from them. Their TPS/user and throughput
measure the prefill queue, so the tier answer there is not the policies' (compare the gains with the table
above)."""),
    ("code", '''one_dir = Path(tempfile.mkdtemp(prefix="specsim-sweep-1prefill-"))
run_sweep(spec, load_scenario(None, OVERRIDES[:2]), trace, one_dir, executor="serial", progress=False)
one = compare(load_records(one_dir), TIERS, baseline="static")
for line in one.attrs["warnings"][:2]:
    print(line)
assert any("prefill-bound" in w for w in one.attrs["warnings"]) and one.caution.astype(bool).any()
one[["tier", "curve", "throughput_per_gpu", "gain_vs_baseline", "winner", "caution", "baseline_caution"]].round(3)'''),
    ("md", """One page to look at: `specsim report DIR` (here `write_report`) writes a self-contained HTML file
with the frontiers, the verification budget, the SLA-tier and goodput tables, the warnings and the sweep's
provenance; it opens offline (docs/report.md)."""),
    ("code", '''from specsim.analysis.report import write_report

page = write_report(out_dir, tiers=TIERS)
assert page.kind == "sweep" and page.path.stat().st_size > 10_000
print(page.path.name, "figures:", ", ".join(page.figures))'''),
    ("md", """Which threshold should SpecDec++ run at each tier? `specsim tune` (here `tune`) searches the knob per
tier with fewer simulated points than the knob x load grid, saving each point as a sweep record
(docs/tuning.md); `specsim compare DIR` then shows the tuned row beside the untuned policies. Its `cautions`
and `notes` are the lines `specsim tune` prints beside the picks (failed points, a pick read from a flagged
point, a pick at the edge of the range)."""),
    ("code", '''from specsim.sweep.tune import TuneSpec, parse_knob, tune

tspec = TuneSpec("specdecpp", parse_knob("threshold=0.05:0.95:0.15", "specdecpp"), tuple(TIERS), (4, 16, 64),
                 seeds=(0,), num_requests=32, requests_per_user=6)
tuned = tune(tspec, scenario, trace, Path(tempfile.mkdtemp(prefix="specsim-tune-")))
assert tuned.num_runs < tuned.grid_runs
print(f"{tuned.num_runs} simulated points of a {tuned.grid_runs}-point grid")
print("\\n".join(tuned.cautions + tuned.notes) or "no cautions or notes")
pd.DataFrame([{"tier": t.tier, "status": t.status, "threshold": t.value,
               "throughput_per_gpu": t.throughput_per_gpu} for t in tuned.tiers])'''),
]

CALIBRATION = [
    ("md", """# 03 Calibration: reliability before and after sequential temperature scaling

DSpark's scheduler treats the survival a_k = c_1 ... c_k of a request's drafts as a probability, so
confidences must be calibrated (DSpark paper §3.2.1). We record a step log from a run that verifies every
draft (`static`, so every position gets a label), fit sequential temperature scaling (STS) on half of the
requests, and compare reliability diagrams and ECE per position on the other half: what
`specsim calibrate LOG --out DIR` does from the shell (docs/calibration.md)."""),
    ("code", SETUP),
    ("code", '''from specsim.acceptance.calibration import (apply_temperatures, calibrate_step_log, reliability, split_by_request,
                                 step_log_arrays, survival)
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import synth_trace

trace = synth_trace(128, rate=20.0, mix="chat=0.4,code=0.3,math=0.3", seed=1,
                    max_prompt_tokens=256, max_output_tokens=256)
result = simulate(trace, "static", load_scenario(), seed=0, record_step_log=True)   # open loop, 20 req/s
log = result.step_log
print(len(log), "step-log rows (one per step and running request)")
log[["step", "request_id", "gamma", "verify_len", "num_accepted", "conf_raw"]].head()'''),
    ("code", '''report = calibrate_step_log(log, source=["notebook run"], warn_to_stderr=False)
m = report.metrics
m[["position", "n_fit", "n_eval", "accept_rate", "temperature", "mean_pred_raw", "mean_pred_sts",
   "ece_raw", "ece_sts", "auroc_raw", "auroc_sts"]].round(4)'''),
    ("md", """Reliability diagrams of the survival at positions 1, 3, 5 and 7 on the held-out half: the
raw head is overconfident (points below the diagonal); after STS they sit on it."""),
    ("code", '''arr = step_log_arrays(log)
ev = ~split_by_request(arr["request_id"])
conf_raw, labels, known = arr["conf_raw"][ev], arr["labels"][ev], arr["known"][ev]
conf_sts = apply_temperatures(conf_raw, report.temperatures)
fig, axes = plt.subplots(1, 4, figsize=(13, 3.4))
for ax, k in zip(axes, [0, 2, 4, 6]):
    mk = known[:, k]
    ax.plot([0, 1], [0, 1], ls="--", color="0.6")
    for conf, name in ((conf_raw, "raw"), (conf_sts, "STS")):
        r = reliability(survival(np.nan_to_num(conf))[mk, k], labels[mk, k])
        ok = r.counts > 0
        ax.plot(r.mean_pred[ok], r.observed[ok], "o-", ms=3, label=f"{name} ECE {100 * r.ece:.1f}%")
    ax.set(title=f"position {k + 1}", xlabel="predicted survival", xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=8)
axes[0].set_ylabel("observed prefix acceptance")
plt.tight_layout()'''),
    ("code", '''fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.plot(m.position, 100 * m.ece_raw, "o-", label="raw")
ax.plot(m.position, 100 * m.ece_sts, "o-", label="STS")
ax.set(xlabel="draft position k", ylabel="ECE (%)", title="ECE of the survival per position (held out)")
ax.legend()'''),
    ("md", """Checks: STS lowers the held-out ECE at every position, and on average by more than 30% on
this small log (about 2,200 held-out rows per position; the paper reports 5.7% -> 2.0% at position 1 on
Alpaca, DSpark paper §3.2.1). A temperature is a monotone map, so position 1's ranking (AUROC) is
unchanged; later survivals multiply differently scaled terms, so their AUROC may move slightly."""),
    ("code", '''assert (m.ece_sts < m.ece_raw).all(), m[["position", "ece_raw", "ece_sts"]]
assert m.ece_sts.mean() < 0.7 * m.ece_raw.mean()
assert np.isclose(m.auroc_sts[0], m.auroc_raw[0], atol=1e-12)
np.testing.assert_allclose(m.auroc_sts, m.auroc_raw, atol=0.01)
assert (report.temperatures > 0).all() and report.censored_fraction < 0.05
print("mean ECE raw {:.2%} -> STS {:.2%}".format(m.ece_raw.mean(), m.ece_sts.mean()))'''),
]

CUSTOM = [
    ("md", """# 04 A custom policy, beside DSpark

A policy is an object with `name`, `fits_zos` and `__call__(view) -> verify lengths` (one int per running
request, in [0, gamma]); the view is read-only and never holds the outcomes of the step being scheduled
(`specsim/policies/base.py`). Here we write a load-aware survival cut-off in a cell: verify a draft while
its survival is at least a threshold that rises with the number of running requests. Then we sweep it
beside `dspark` and `static` and compare frontiers (same scenario as notebook 02, whose two prefill instances keep
every point off the prefill queue)."""),
    ("code", SETUP),
    ("code", '''class LoadAwareCutoff:
    """Verify draft j of request r while survival a_{r,j} >= min(0.9, R / 64) (R = running requests)."""

    name = "load-aware-cutoff"
    fits_zos = False                     # reads this step's confidences, so the host overhead is exposed

    def __call__(self, view):
        threshold = min(0.9, view.num_requests / 64)
        return np.sum(view.survival() >= threshold, axis=1).astype(np.int64)   # (R,) prefix lengths'''),
    ("md", """Register it under a name so a sweep can use it (a file would work too: `--policies
path/to/file.py:LoadAwareCutoff`; installed packages use the `specsim.policies` entry-point group).
A hand-built view checks it first: with 32 running requests the threshold is 0.5."""),
    ("code", '''from specsim.hardware.profile import resolve_profile
from specsim.policies import SchedulingView, available_policies, register_policy

if "load-aware-cutoff" not in available_policies():
    register_policy("load-aware-cutoff", lambda **kw: LoadAwareCutoff(), "survival >= min(0.9, R/64)")

R, gamma = 32, 4
conf = np.tile([0.9, 0.7, 0.8, 0.9], (R, 1))            # survival 0.9, 0.63, 0.504, 0.4536
z = np.zeros(R, np.int64)
view = SchedulingView(step=0, now_s=0.0, gamma=gamma, request_ids=np.arange(R),
                      domains=np.array(["chat"] * R, dtype=object), conf_raw=conf, conf=conf,
                      num_generated=z + 1, prompt_tokens=z + 100, kv_tokens=0.0, hist_drafts_verified=z,
                      hist_drafts_accepted=z, last_verify_len=z - 1, last_accepted=z - 1,
                      profile=resolve_profile("a100-llama2-7b-tp1"))
assert (LoadAwareCutoff()(view) == 3).all()'''),
    ("code", '''import tempfile
from specsim.analysis.frontier import compare, frontiers
from specsim.analysis.sweep_tables import cautions
from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, load_records, results_frame, run_sweep, seed_spread
from specsim.workload import synth_trace

scenario = load_scenario(None, ["profile.name=a100-llama2-7b-tp1", "drafter.name=eagle3", "prefill.num_instances=2"])
trace = synth_trace(400, rate=20.0, mix="chat=0.4,code=0.3,math=0.3", seed=0,
                    max_prompt_tokens=256, max_output_tokens=160)
spec = SweepSpec(policies=("load-aware-cutoff", "dspark", "static"), concurrency=(4, 16, 64),
                 num_requests=32, requests_per_user=6)
out_dir = Path(tempfile.mkdtemp(prefix="specsim-custom-"))
run_sweep(spec, scenario, trace, out_dir, executor="serial", progress=False)
records = load_records(out_dir)
df = results_frame(records)
assert (df.status == "ok").all() and cautions(df) == []      # no point flagged (thrashing, prefill-bound, ...)
df[["curve", "load", "mean_tps_per_user", "output_throughput_per_gpu", "mean_verify_tokens_per_request"]]'''),
    ("code", '''fr = frontiers(seed_spread(df))
fig, ax = plt.subplots(figsize=(6.5, 4.5))
for curve, f in fr.items():
    ax.plot(f.tps_per_user, f.throughput_per_gpu, "-o", label=curve)
ax.set(xlabel="TPS/user (tok/s)", ylabel="output throughput per GPU (tok/s)", title="custom policy vs dspark")
ax.legend()
TIERS = [150.0, 200.0]
table = compare(records, TIERS, baseline="static")
print("\\n".join(table.attrs["warnings"]))                 # what specsim compare prints under its table
assert not table[["caution", "runner_up_caution", "baseline_caution"]].astype(bool).any().any()
table[["tier", "curve", "status", "throughput_per_gpu", "gain_vs_baseline", "winner", "caution"]].round(3)'''),
    ("md", """What the numbers say (no figure is read from a flagged point; the cautions above say each tier is
met by the mean, with part of the winner's requests below it), printed by the cell below from this run: the
cut-off's budget shrinks with load as designed, but a threshold that ignores the step-time curve leaves
throughput on the table: DSpark, which prices every extra token with SPS(B), is ahead of it at both tiers and
ahead of static, and the cut-off does not beat static, because at 16 users it still verifies about half of its
drafts while paying the host overhead that static hides. (Every speculating step here also pays speculation's
own overhead, vLLM issue 49548's sourced defaults, as this plain Vidur table states none: docs/profiles.md.)"""),
    ("code", '''budget = df.pivot(index="load", columns="curve", values="mean_verify_tokens_per_request")
assert budget["load-aware-cutoff"].is_monotonic_decreasing
at = table.set_index(["tier", "curve"]).throughput_per_gpu
for t in TIERS:
    assert at[(t, "dspark")] > 1.05 * at[(t, "load-aware-cutoff")], t
    assert at[(t, "dspark")] > at[(t, "static")] > at[(t, "load-aware-cutoff")], t
    print(f"at {t:g} tok/s/user: dspark {at[(t, 'dspark')] / at[(t, 'load-aware-cutoff')]:.2f}x the cut-off and "
          f"{at[(t, 'dspark')] / at[(t, 'static')] - 1:+.1%} over static; the cut-off "
          f"{at[(t, 'load-aware-cutoff')] / at[(t, 'static')] - 1:+.1%} against static")
drafts = budget.loc[16.0, "load-aware-cutoff"] - 1                   # verify tokens = 1 + verified drafts
print(f"at 16 users the cut-off verifies {drafts:.1f} of {scenario.engine.gamma} drafts per request and step")
budget.round(2)'''),
]

STEPMODEL = [
    ("md", """# 05 Your model on your GPU: a step-model profile, fitted to your engine

The step time decides what speculation is worth at load. Here we build the step model of a model from its
Hugging Face `config.json` on a GPU from its datasheet, look at its terms, fit two engine-level terms to
no-speculation measurements (the `vllm bench serve` results of a public vLLM run on H100, typed in
`tests/data/validation/`), check the fit on the loads it did not see, and compare policies on the fitted
profile. `docs/profiles.md` documents every term; `docs/validation.md` the protocol."""),
    ("code", SETUP),
    ("code", '''from specsim.hardware.model_config import model_from_hf_config
from specsim.hardware.stepmodel import TERMS, step_model, terms_table

model = model_from_hf_config(ROOT / "tests/data/hf_configs/qwen3-8b.json")
sm = step_model(model, "h100")                       # datasheet numbers; default engine constants
terms = terms_table(sm, [1, 8, 64, 256, 1024], num_requests=[1, 8, 64, 256, 1024],
                    kv_tokens=np.array([1, 8, 64, 256, 1024]) * 1500)   # 1,500 cached tokens per request
terms.round(3)'''),
    ("code", '''ax = terms.set_index("batch_tokens")[list(TERMS)].plot.area(figsize=(7, 3.5), logx=True)
ax.set_ylabel("ms per step"); ax.set_title("Qwen3-8B on H100: the step's terms")
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)   # beside the areas, not on them
# closed form: the KV read is cached tokens x bytes per token / (HBM x attention efficiency)
kv_bytes = 2 * 36 * 8 * 128 * 2
assert terms.loc[0, "total"] > terms.loc[0, "gemm"] > 0
assert np.isclose(sm.kv_read_s_per_token, kv_bytes / (3.35e12 * sm.terms.attn_bw_eff))'''),
    ("md", """Fit: the public series (vLLM 0.11, 1x H100, ShareGPT, 1 to 8 users) has four loads; we fit
`kernel_s` (the step's floor beyond streaming the weights) on the first and predict the other three by
simulation, as `specsim.studies.validation` does for every series."""),
    ("code", '''from specsim.studies.validation import load_rows, validate_series

rows = load_rows(ROOT / "tests/data/validation")
res = validate_series(rows, "vllm_h100_qwen3-8b_sharegpt_nospec", ROOT / "tests/data/hf_configs")
print(res.params)
held = res.table[~res.table.fitted]
assert (held.tpot_error.abs() < 0.10).all()            # every unseen load within 10% on TPOT
res.table.round(3)'''),
    ("md", """The fitted profile drives a simulation like any other; its drafter cost now follows the
drafter's shape (5 draft layers of the target's config for DSpark) and its KV capacity the GPU's memory."""),
    ("code", '''from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import synth_trace

profile = res.model.profile(4096, kind="fitted")
trace = synth_trace(256, rate=1.0, mix="chat=0.4,code=0.3,math=0.3", seed=0, max_prompt_tokens=512,
                    max_output_tokens=256)
out = {p: simulate(trace, p, load_scenario(), concurrency=16, seed=0, profile=profile).summary
       for p in ("none", "mtp1", "dspark")}
table = pd.DataFrame(out).T[["output_throughput_per_gpu", "mean_tps_per_user", "mean_acceptance_length"]]
assert table.loc["dspark", "mean_tps_per_user"] > table.loc["none", "mean_tps_per_user"]
table.round(2)'''),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_policy_frontiers.ipynb": FRONTIERS,
    "03_calibration.ipynb": CALIBRATION,
    "04_custom_policy.ipynb": CUSTOM,
    "05_step_model.ipynb": STEPMODEL,
}


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` with no outputs and no execution counts."""
    cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in NOTEBOOKS[name]]
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{Path(name).stem[:2]}-{i:02d}"       # stable ids: rebuilding changes nothing
    return nb


def main(argv: list[str]) -> int:
    for name in NOTEBOOKS:
        nbformat.write(build(name), HERE / name)
        print(f"wrote notebooks/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
