"""DSpark against its yardsticks on the README's main job: the table of docs/policies.md ("dspark").

Each point is ``specsim run --trace traces/prod.jsonl --concurrency C --num-requests 512 --set
cluster.kv_capacity_tokens=10000000 --policy P`` (seed 0; ``--scenario specsim/scenarios/v4-flash.toml`` for
the V4-Flash row), run through the same Python API the command uses, and the figure is the closed-loop
window's output throughput per GPU (tok/s/GPU, ``summary["window"]``). Policies: ``dspark`` with its two
early-stop rules (``hull``, the default, and ``paper``, Algorithm 1 as printed), both with ``diagnose = true``
(the share of steps whose early stop ended below the global best of Theta on the same view), the yardstick
``dspark-global``, ``static`` at k = 7, ``mtp1`` and ``none``.

Target (issue 21): dspark (hull) within 5% of dspark-global at 16, 32 and 64 users on the default scenario and
at 64 users on V4-Flash. ``tests/test_dspark_hull.py`` recomputes one reduced point with :func:`measure`.

Run: ``python benchmarks/policy_targets.py`` (24 runs, about 10 minutes on one core) prints the table and the
verdicts; ``--write docs/policies.md`` also replaces the table between the markers in that file;
``--check`` exits 1 when a target is missed.

Frontiers (``--frontiers DIR``): the second target, dspark never below mtp1 at any tier, and the choice of
``specsim run``'s default policy (the deployable policy that wins the most tiers). Three sweeps of every
deployable built-in policy (:data:`DEPLOYABLE`), each ``specsim sweep --trace traces/prod.jsonl --concurrency
... --num-requests 128 --requests-per-user 8 --seeds 2 --set cluster.kv_capacity_tokens=10000000`` on
:data:`FRONTIERS` (the default scenario, V4-Flash, and h100-qwen3-8b-tp1-terms with 8 prefill instances) into
``DIR/<frontier>`` (points already there are kept), then ``specsim compare --baseline none --json`` at the default
tiers 50, 100, 150, 200 TPS/user: the winner per tier, dspark's and mtp1's throughput there, and the tally of
tiers won. With ``--write`` the table goes between the ``policy_frontiers`` markers; ``--check`` also exits 1
when dspark is below mtp1 at a tier. About 20 minutes on two cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "traces" / "prod.jsonl"
V4 = REPO / "specsim" / "scenarios" / "v4-flash.toml"
KV = "cluster.kv_capacity_tokens=10000000"
POINTS = [("default", None, 16), ("default", None, 32), ("default", None, 64), ("v4-flash", V4, 64)]
#: (column, policy, keyword arguments of simulate)
POLICIES = [("dspark (hull)", "dspark", {"early_stop": "hull", "diagnose": True}),
            ("dspark (paper)", "dspark", {"early_stop": "paper", "diagnose": True}),
            ("dspark-global", "dspark-global", {}),
            ("static k=7", "static", {"gamma": 7}),
            ("mtp1", "mtp1", {}),
            ("none", "none", {})]
TOLERANCE = 0.05
BEGIN, END = "<!-- policy_targets:begin -->", "<!-- policy_targets:end -->"
#: every built-in policy but the references (oracle, dspark-global), which compare never names a winner
DEPLOYABLE = ("none,mtp1,static,specdecpp,threshold,dspark,dspark-async,vllm-adaptive,trtllm-confidence,vllm-dsd,"
              "trtllm-draft-len-schedule")
#: frontier -> (its sweep's own arguments, its closed-loop loads): up to 256 users, where the default scenario's
#: frontier reaches the 50 TPS/user tier, and 512 on the other two, whose max_num_seqs (256) makes that a queueing
#: point (throughput flat, TPS/user falling) so that their 50 tier is bracketed
FRONTIERS = {"default": ([], "1,4,16,64,256"),
             "v4-flash": (["--scenario", str(V4)], "1,4,16,64,256,512"),
             "h100-qwen3-8b-tp1-terms": (["--set", "profile.name=h100-qwen3-8b-tp1-terms",
                                          "--set", "prefill.num_instances=8"], "1,4,16,64,256,512")}
FRONTIER_BEGIN, FRONTIER_END = "<!-- policy_frontiers:begin -->", "<!-- policy_frontiers:end -->"


def measure(policy: str, concurrency: int, scenario: Path | None = None, num_requests: int = 512,
            sets: tuple[str, ...] = (), **kwargs) -> dict:
    """One point: ``{"throughput": window tok/s/GPU, "diagnostics": dict | None}``.

    Args:
        policy: a policy name; ``kwargs``: its knobs and ``gamma`` (as :func:`specsim.simulation.simulate`).
        scenario: a scenario TOML (None: the bundled default).
        sets: more ``section.key=value`` overrides (as ``--set``), after the KV capacity.
    """
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.workload import load_trace

    trace = load_trace(TRACE).head(num_requests)
    summary = simulate(trace, policy, load_scenario(scenario, [KV, *sets]), seed=0, concurrency=concurrency,
                       **kwargs).summary
    return {"throughput": summary["window"]["output_throughput_per_gpu"],
            "diagnostics": summary.get("policy_diagnostics")}


def table(num_requests: int) -> tuple[list[str], list[str]]:
    """(markdown table lines, verdict lines) of every point."""
    head = (["scenario", "users"] + [c for c, _, _ in POLICIES]
            + ["hull / global", "below best, shortfall: hull", "below best, shortfall: paper"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    verdicts = []
    for name, scenario, users in POINTS:
        got = {c: measure(p, users, scenario, num_requests, **kw) for c, p, kw in POLICIES}
        ratio = got["dspark (hull)"]["throughput"] / got["dspark-global"]["throughput"]
        shares = [f"{d['below_global_best'] / max(d['steps'], 1):.0%}, {d['theta_shortfall_sum'] / max(d['steps'], 1):.1%}"
                  for d in (got["dspark (hull)"]["diagnostics"], got["dspark (paper)"]["diagnostics"])]
        lines.append("| " + " | ".join([name, str(users)] + [f"{got[c]['throughput']:,.0f}" for c, _, _ in POLICIES]
                                       + [f"{ratio:.3f}", *shares]) + " |")
        verdicts.append(f"verdict {name} {users} users: dspark (hull) / dspark-global {ratio:.3f}, target >= "
                        f"{1 - TOLERANCE:.2f}: {'MET' if ratio >= 1 - TOLERANCE else 'MISSED'}")
        print(lines[-1], flush=True)
    return lines, verdicts


def write(path: Path, lines: list[str], note: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the text between the markers ``begin`` and ``end`` of ``path`` with ``note`` and the table."""
    text = path.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{path}: no {begin} ... {end} markers")
    body = "\n".join([begin, note, "", *lines, end])
    path.write_text(text[: text.index(begin)] + body + text[text.index(end) + len(end):])


def specsim(*args: str) -> str:
    """Run the ``specsim`` command of this Python environment; its stdout (raises on a non-zero exit)."""
    import subprocess

    cmd = [sys.executable, "-c", "import sys; from specsim.cli import main; sys.exit(main())", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout


def frontier_winners(out: Path) -> dict[str, dict]:
    """Sweep each of :data:`FRONTIERS` into ``out/<name>`` and compare it: ``{name: compare's --json object}``."""
    import json

    got = {}
    for name, (extra, loads) in FRONTIERS.items():
        sweep_dir = out / name
        specsim("sweep", "--trace", str(TRACE), "--out", str(sweep_dir), "--concurrency", loads, "--num-requests",
                "128", "--requests-per-user", "8", "--seeds", "2", "--set", KV, "--policies", DEPLOYABLE, "--quiet",
                *extra)
        got[name] = json.loads(specsim("compare", str(sweep_dir), "--baseline", "none", "--json"))
        print(f"{name}: swept and compared", flush=True)
    return got


def frontier_table(got: dict[str, dict]) -> tuple[list[str], list[str]]:
    """(markdown lines: per frontier and tier the winner, then dspark, mtp1, dspark-async, vllm-adaptive and
    static; then the tally of tiers won. Verdict lines: dspark against mtp1 at every tier)."""
    cols = ("dspark", "mtp1", "dspark-async", "vllm-adaptive", "static")
    lines = ["| frontier | tier | winner (lead over the runner-up, paired t-test) | " + " | ".join(cols)
             + " | dspark / mtp1 |",
             "|---|---:|---|" + "---:|" * (len(cols) + 1)]
    wins: dict[str, int] = {}
    verdicts = []
    for name, cmp in got.items():
        thr = {(r["tier"], r["curve"]): r for r in cmp["table"]}
        for w in cmp["winners"]:
            tier = w["tier"]
            wins[w["curve"]] = wins.get(w["curve"], 0) + 1
            cells = [_cell(thr.get((tier, c))) for c in cols]
            d, m = (thr.get((tier, c), {}).get("throughput_per_gpu") for c in ("dspark", "mtp1"))
            ratio = d / m if d is not None and m is not None and m == m and m > 0 else None
            lines.append(f"| {name} | {tier:g} | `{w['curve']}` (+{w['margin']:.1%} over `{w['runner_up']}`, "
                         f"{w['margin_verdict']}) | "
                         + " | ".join(cells) + f" | {'-' if ratio is None else f'{ratio:.2f}'} |")
            ok = ratio is None or ratio >= 1
            verdicts.append(f"verdict {name} tier {tier:g}: dspark / mtp1 "
                            f"{'mtp1 infeasible' if ratio is None else f'{ratio:.3f}'}: {'MET' if ok else 'MISSED'}")
    tally = ", ".join(f"`{c}` {n}" for c, n in sorted(wins.items(), key=lambda kv: (-kv[1], kv[0])))
    lines += ["", f"Tiers won: {tally} (of {sum(wins.values())})."]
    return lines, verdicts


def _cell(row: dict | None) -> str:
    """One policy's throughput at a tier as compare gives it (c: covered, every load point beats the tier; -: not
    swept)."""
    if row is None:
        return "-"
    if row["throughput_per_gpu"] is None or row["throughput_per_gpu"] != row["throughput_per_gpu"]:
        return "infeasible"
    return f"{row['throughput_per_gpu']:,.0f}{' c' if row['status'] == 'covered' else ''}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-requests", type=int, default=512)
    ap.add_argument("--write", type=Path, default=None, help="a Markdown file with the table markers")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--frontiers", type=Path, default=None, metavar="DIR",
                    help="the frontier targets instead: sweep the three frontiers into DIR and compare them")
    args = ap.parse_args()
    if args.frontiers is not None:
        lines, verdicts = frontier_table(frontier_winners(args.frontiers))
        note = ("Per-tier winners and throughput per GPU (tok/s/GPU; c: covered) of three sweeps, seeds 0 and 1; "
                "generated by `python benchmarks/policy_targets.py --frontiers runs/frontiers --write "
                "docs/policies.md`.")
        markers = (FRONTIER_BEGIN, FRONTIER_END)
    else:
        lines, verdicts = table(args.num_requests)
        note = (f"Window output throughput per GPU (tok/s/GPU), {args.num_requests} requests of traces/prod.jsonl, "
                "seed 0, KV capacity 10M tokens; `static k=7` runs gamma 7 on every scenario (v4-flash.toml's own "
                "gamma is 5, which its frontier tables use); generated by `python benchmarks/policy_targets.py "
                "--write docs/policies.md`.")
        markers = (BEGIN, END)
    print("\n".join([*lines, *verdicts]))
    if args.write is not None:
        write(args.write, lines, note, *markers)
    return 1 if args.check and any(v.endswith("MISSED") for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
