"""Side by side: this checkout against the commit issue 25 starts from (10b4cad), each job in fresh processes,
alternating A B A B ... and taking medians (machines are noisy; only the ratio is the figure to quote).

The starting commit is unpacked with ``git archive`` into a temporary folder outside the repository and run
with the same interpreter, ``PYTHONPATH`` pointing at it (A = that commit, B = this working tree). Before the
timed rounds each job runs once per side untimed (numba compiles or loads its kernels into each tree's cache;
this checkout builds its acceptance model into the on-disk cache, ``specsim.acceptance.cache``, as any user's
second run finds it). Jobs (``benchmarks/side_by_side_driver.py`` holds the measured code):

* ``vidur3000``: policy ``none`` on the Vidur workload of ``$SPECSIM_SHARED/anchors/vidur_run/workload.jsonl``
  tiled 10 times (3,000 requests; copy k arrives k x (last arrival + 0.5 s) later) with the bundled
  ``vidur-codellama34b-a100-tp2`` scenario: whole-process wall seconds, event-loop seconds per step, and a
  digest of every request's TTFT/E2E and every step's duration (equal digests: results unchanged).
  Targets (issue 25): whole process <= 0.4x, loop per step <= 0.33x.
* ``main``: the README's main job, ``specsim run --policy dspark --trace traces/prod.jsonl``, whole process.
  Target: <= 0.5x.
* ``startup``: seconds to import the run path (``specsim.simulation``) and to get the default scenario's
  acceptance model, in a fresh process.
* ``decide``: the decisions at R = 512, gamma = 16, per call (wall p50/p90/p99/max and thread-CPU p50
  microseconds over 300 calls) in seven regimes of profile and confidence (driver docstring): ``dspark``
  (hull and paper early stop) and the engine variants (``vllm-adaptive`` and ``trtllm-confidence``: the
  ``capacity`` hook and ``__call__`` together; ``vllm-dsd``, ``trtllm-draft-len-schedule``). Target: each
  policy's worst regime, median per call, <= 100 us (the p99 and max of a loaded machine are its scheduler's
  time slices, which the CPU columns show apart).

Run: ``python benchmarks/bench_side_by_side.py [--repeat 3] [--jobs startup,vidur3000,main,decide] [--base 10b4cad]``.
A benchmark, not a test: it prints figures and one ``verdict`` line per target; under a missed loop or
whole-process target, where B's time goes (``benchmarks/step_phases.py``: the loop by phase, and a fresh
process from start to exit), and under a missed decision target its two hooks' shares.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "benchmarks" / "side_by_side_driver.py"
SCENARIO = "specsim/scenarios/vidur-codellama34b-a100-tp2.toml"
CLI = "from specsim.cli import main; main()"


def shared_dir() -> Path:
    """``$SPECSIM_SHARED`` or ``../shared`` next to the repository."""
    return Path(os.environ.get("SPECSIM_SHARED", REPO.parent / "shared")).resolve()


def unpack(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` written under ``dest`` by ``git archive`` (no worktree, nothing in the repository)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def tiled_trace(src: Path, copies: int, dest: Path) -> Path:
    """``copies`` back-to-back copies of the JSONL trace ``src`` (ids renumbered) written to ``dest``."""
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    gap = max(r["arrival_s"] for r in rows) + 0.5
    with dest.open("w") as f:
        for k in range(copies):
            for i, r in enumerate(rows):
                f.write(json.dumps({**r, "id": k * len(rows) + i, "arrival_s": round(r["arrival_s"] + k * gap, 6)})
                        + "\n")
    return dest


#: Whether the jobs may write Python's bytecode caches (``__pycache__``), as a default Python does on a user's first
#: run. ``--source-only`` sets False: every process compiles the tree's modules from source, as under
#: ``PYTHONDONTWRITEBYTECODE=1`` (which some machines, this project's VM among them, set for every process).
WRITE_BYTECODE = True


def job_env(root: Path | None = None) -> dict[str, str]:
    """The environment of a job: ``PYTHONPATH=root`` (where given) and the bytecode setting (:data:`WRITE_BYTECODE`)."""
    env = {**os.environ, **({"PYTHONPATH": str(root)} if root is not None else {})}
    if WRITE_BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def timed(argv: list[str], root: Path) -> tuple[float, str]:
    """Wall seconds and stdout of ``argv`` run from ``root`` with ``PYTHONPATH=root`` (and, unless
    :data:`WRITE_BYTECODE` is False, ``PYTHONDONTWRITEBYTECODE`` unset, so the untimed warm-up run leaves each
    tree's bytecode caches for the timed rounds, as a user's first run leaves them for the next).

    Raises:
        SystemExit: the command failed (its stderr is shown).
    """
    env = job_env(root)
    t0 = time.perf_counter()
    out = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {root} exited {out.returncode}:\n{out.stderr[-3000:]}")
    return wall, out.stdout


def job_argv(job: str, root: Path, trace3000: Path | None) -> list[str]:
    """The command of ``job`` for the tree at ``root``."""
    py = sys.executable
    if job == "vidur3000":
        return [py, str(DRIVER), "vidur", str(trace3000), str(root / SCENARIO)]
    if job == "main":
        return [py, "-c", CLI, "run", "--policy", "dspark", "--trace", str(root / "traces" / "prod.jsonl")]
    return [py, str(DRIVER), job]


def rounds(job: str, sides: dict[str, Path], repeat: int, trace3000: Path | None) -> dict[str, list]:
    """Untimed warm-up per side, then ``repeat`` alternating rounds: side -> [(wall_s, stdout), ...]."""
    for root in sides.values():
        timed(job_argv(job, root, trace3000), root)
    got: dict[str, list] = {s: [] for s in sides}
    for _ in range(repeat):
        for s, root in sides.items():
            got[s].append(timed(job_argv(job, root, trace3000), root))
    return got


PHASES = REPO / "benchmarks" / "step_phases.py"


def where_time_goes(job: list[str], whole: bool) -> None:
    """For a missed target: B's loop by phase (``step_phases.py``) and, for a whole-process miss, where a fresh
    process's time goes from start to exit."""
    for extra in ([], ["--whole"]) if whole else ([],):
        out = subprocess.run([sys.executable, str(PHASES), *job, *extra], cwd=REPO, capture_output=True, text=True,
                             env=job_env())
        print(out.stdout.rstrip() if out.returncode == 0 else f"step_phases.py failed:\n{out.stderr[-2000:]}")


def report_vidur(got: dict[str, list], trace3000: Path | None = None) -> None:
    """Whole-process and loop-per-step medians, the ratios, and whether the results are identical; for a missed
    target, where B's time goes."""
    med = {}
    for s, runs in got.items():
        js = [json.loads(o.strip().splitlines()[-1]) for _, o in runs]
        med[s] = (statistics.median(w for w, _ in runs), statistics.median(j["loop_s"] / j["steps"] for j in js),
                  js[0]["steps"], {j["digest"] for j in js})
        print(f"vidur3000 {s}: whole process {med[s][0]:.2f} s, loop {1e6 * med[s][1]:.1f} us/step "
              f"({med[s][2]} steps), digest {sorted(med[s][3])}")
    (wa, la, na, da), (wb, lb, nb, db) = med["A"], med["B"]
    same = da == db and len(da) == 1 and na == nb
    print(f"verdict vidur3000 results: {'UNCHANGED' if same else 'CHANGED'} (steps {na} vs {nb})")
    print(f"verdict vidur3000 whole process: B/A {wb / wa:.2f}, target <= 0.40: {'MET' if wb / wa <= 0.4 else 'MISSED'}")
    print(f"verdict vidur3000 loop per step: B/A {lb / la:.2f}, target <= 0.33: {'MET' if lb / la <= 0.33 else 'MISSED'}")
    if trace3000 is not None and (wb / wa > 0.4 or lb / la > 0.33):
        where_time_goes(["vidur", str(trace3000), str(REPO / SCENARIO)], whole=wb / wa > 0.4)


def report_main(got: dict[str, list], trace3000: Path | None = None) -> None:
    """Whole-process medians of the README main job and the ratio; for a miss, where B's time goes."""
    med = {s: statistics.median(w for w, _ in runs) for s, runs in got.items()}
    for s, runs in got.items():
        print(f"main {s}: whole process median {med[s]:.2f} s (runs {', '.join(f'{w:.2f}' for w, _ in runs)})")
    r = med["B"] / med["A"]
    print(f"verdict main job whole process: B/A {r:.2f}, target <= 0.50: {'MET' if r <= 0.5 else 'MISSED'}")
    if r > 0.5:
        where_time_goes(["main"], whole=True)




def report_startup(got: dict[str, list], trace3000: Path | None = None) -> None:
    """Medians of the run path's import time and of getting the acceptance model, per side."""
    med = {}
    for s, runs in got.items():
        js = [json.loads(o.strip().splitlines()[-1]) for _, o in runs]
        med[s] = {k: statistics.median(j[k] for j in js) for k in ("import_s", "model_s")}
        print(f"startup {s}: import specsim.simulation {med[s]['import_s']:.2f} s, acceptance model "
              f"{med[s]['model_s']:.3f} s, whole process {statistics.median(w for w, _ in runs):.2f} s")
    print(f"startup B/A: imports {med['B']['import_s'] / med['A']['import_s']:.2f}, acceptance model "
          f"{med['B']['model_s'] / med['A']['model_s']:.3f}")


def report_decide(got: dict[str, list], trace3000: Path | None = None) -> None:
    """Per-call distributions of each decision (medians over the rounds of each percentile), and per policy its
    worst regime's median against the 100 us target."""
    worst: dict[str, dict[str, tuple[float, str]]] = {}
    for s, runs in got.items():
        js = [json.loads(o.strip().splitlines()[-1]) for _, o in runs]
        for policy, regimes in js[0].items():
            if regimes is None:
                print(f"decide {s} {policy}: not in this tree")
                continue
            for regime in regimes:
                p = {k: statistics.median(j[policy][regime][k] for j in js)
                     for k in ("p50", "p90", "p99", "max", "cpu_p50")}
                print(f"decide {s} {policy:28s} {regime:12s}: p50 {p['p50']:7.1f} us  p90 {p['p90']:7.1f}  "
                      f"p99 {p['p99']:8.1f}  max {p['max']:8.1f}  cpu p50 {p['cpu_p50']:7.1f}  "
                      f"(admitted {regimes[regime]['admitted']})")
                worst.setdefault(policy, {})
                if p["p50"] > worst[policy].get(s, (0.0, ""))[0]:
                    worst[policy][s] = (p["p50"], regime)
    for policy, sides in worst.items():
        b, b_regime = sides.get("B", (float("nan"), "-"))
        a = f"A: {sides['A'][0]:.1f} us ({sides['A'][1]}), B/A {b / sides['A'][0]:.3f}" if "A" in sides else "A: absent"
        verdict = "MET" if b <= 100 else "MISSED"
        print(f"verdict decide {policy} R=512 gamma=16: worst-regime median {b:.1f} us ({b_regime}); {a}; "
              f"target <= 100: {verdict}")
        if verdict == "MISSED" and "B" in got:
            js = [json.loads(o.strip().splitlines()[-1]) for _, o in got["B"]]
            part = {k: statistics.median(j[policy][b_regime].get(k, float("nan")) for j in js)
                    for k in ("capacity_p50", "call_p50")}
            print(f"  where the time goes ({b_regime}, B, medians): the capacity hook (the budget) "
                  f"{part['capacity_p50']:.1f} us, __call__ (the allocation) {part['call_p50']:.1f} us; the "
                  "parts of each: benchmarks/README.md, the decision sections")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", default="startup,vidur3000,main,decide")
    ap.add_argument("--base", default="10b4cad", help="the starting commit (side A)")
    ap.add_argument("--source-only", action="store_true",
                    help="no bytecode caches: every process compiles each tree's modules from source")
    args = ap.parse_args()
    global WRITE_BYTECODE
    WRITE_BYTECODE = not args.source_only
    jobs = [j for j in args.jobs.split(",") if j]
    print(f"{datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; A = {args.base}, B = this working tree; "
          f"bytecode caches {'written by the warm-up runs' if WRITE_BYTECODE else 'off (--source-only)'}")
    with tempfile.TemporaryDirectory(prefix="specsim-sbs-") as tmp:
        sides = {"A": unpack(args.base, Path(tmp) / "base"), "B": REPO}
        trace3000 = None
        if "vidur3000" in jobs:
            src = shared_dir() / "anchors" / "vidur_run" / "workload.jsonl"
            if not src.is_file():
                print(f"vidur3000 skipped: {src} not found (set SPECSIM_SHARED)")
                jobs.remove("vidur3000")
            else:
                trace3000 = tiled_trace(src, 10, Path(tmp) / "vidur3000.jsonl")
        report = {"vidur3000": report_vidur, "main": report_main, "decide": report_decide,
                  "startup": report_startup}
        for job in jobs:
            report[job](rounds(job, sides, args.repeat, trace3000), trace3000)
            sys.stdout.flush()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
