"""Wall time of the commands that analyse a sweep folder: ``specsim compare``, ``recommend`` and ``report``.

Usage::

    python benchmarks/bench_analysis.py [SWEEP_DIR] [--repeat 3] [--base OLD_TREE] [--save-outputs D]
                                        [--check-outputs D]

Each command runs in a fresh process (``python -m specsim ...`` with ``PYTHONPATH`` set to this tree), as a user
runs it, ``--repeat`` times; the table gives the fastest and the median wall time and CPU time (user + system of
the process: the figure to trust on a busy machine), and ``specsim --help`` beside them (the CLI's own start-up,
which no analysis can go below). ``--base OLD_TREE`` times another source tree too (e.g. a ``git worktree`` of the
commit before a change), the two trees' runs alternating (A B A B) so that the machine's load weighs on both alike.
The folder is only read: the report is written to a temporary file. Without SWEEP_DIR, a small sweep (mtp1, static,
dspark at 4 and 16 users, 3 seeds, on the bundled trace) is made under a temporary folder first, so the script runs
on a fresh clone.

``--save-outputs D`` writes what each command printed (at ``COLUMNS=200``, stdout and stderr apart; ``compare --json``
and ``compare --goodput`` too, which read the per-request latencies) and the report's HTML, less the date matplotlib
stamps into its figures, into folder ``D``; ``--check-outputs D`` compares this tree's outputs with such a folder byte
for byte and exits 1 on any difference (save with the old tree, check with the new one, on the same SWEEP_DIR);
``--check-base`` compares them with ``--base``'s, made there and then; either check then stops, timing nothing,
as ``--repeat 0`` does. A benchmark, not a test: no timing assertions.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The command lines timed, SWEEP_DIR and the report's file filled in.
COMMANDS = {"compare": ["compare", "{dir}"], "recommend": ["recommend", "{dir}"],
            "report": ["report", "{dir}", "--out", "{html}"]}
#: Checked by --save-outputs / --check-outputs beside COMMANDS, not timed: the paths that read per-request latencies.
CHECKED = {"compare-json": ["compare", "{dir}", "--json", "--goodput", "ttft:2000 tpot:50", "--metric-percentiles",
                            "50,99"],
           "compare-goodput": ["compare", "{dir}", "--goodput", "tpot:50", "--metric-percentiles", "50,90,99"]}
#: matplotlib's date in each SVG figure: the one part of a report that differs from run to run.
SVG_DATE = re.compile(r"<dc:date>[^<]*</dc:date>")


def _run(args: list[str], tree: Path | None = None) -> tuple[float, subprocess.CompletedProcess, float]:
    """(wall seconds, the finished process, its CPU seconds: user + system) of ``python -m specsim ARGS`` at
    ``COLUMNS=200``; with ``tree``, the specsim of that source tree (``PYTHONPATH``), else the one this interpreter
    imports."""
    env = {**os.environ, "COLUMNS": "200", **({"PYTHONPATH": str(tree)} if tree else {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "specsim", *args], check=False, capture_output=True, text=True,
                         env=env)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, out, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def make_sweep(out: Path) -> Path:
    """A small sweep into ``out``: 3 policies x 2 closed-loop loads x 3 seeds on the bundled trace (~30 s)."""
    _, done, _ = _run(["sweep", "--trace", str(REPO / "traces" / "prod.jsonl"), "--out", str(out), "--policies",
                    "mtp1,static,dspark", "--concurrency", "4,16", "--seeds", "3", "--requests-per-user", "6"])
    if done.returncode != 0:
        sys.exit(f"the benchmark's sweep failed:\n{done.stdout}\n{done.stderr}")
    return out


def outputs(sweep: Path, tmp: Path, tree: Path = REPO) -> dict[str, str]:
    """What each command prints (stdout and stderr apart) and the report's HTML (its SVG dates removed), with the
    specsim of source tree ``tree``."""
    got = {}
    for name, args in {**COMMANDS, **CHECKED}.items():
        html = tmp / "report.html"
        _, done, _ = _run([a.format(dir=sweep, html=html) for a in args], tree)
        got[f"{name}.out"] = done.stdout.replace(str(html), "<report.html>")
        got[f"{name}.err"] = done.stderr
        got[f"{name}.rc"] = f"{done.returncode}\n"
        if name == "report" and html.is_file():
            got["report.html"] = SVG_DATE.sub("", html.read_text())
    return got


def check(got: dict[str, str], want: dict[str, str]) -> int:
    """0 when this tree's outputs ``got`` equal ``want`` byte for byte, else 1 (the differing files named)."""
    names = sorted(set(got) | set(want))
    bad = [n for n in names if got.get(n) != want.get(n)]
    for n in names:
        print(f"{n:16s} {'DIFFERS' if n in bad else 'identical'}")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep_dir", nargs="?", type=Path, help="a sweep folder (default: a small one made here)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    ap.add_argument("--base", type=Path, help="another source tree (an older checkout) timed too, its runs "
                    "alternating with this tree's (A B A B), so that the machine's load weighs on both alike")
    ap.add_argument("--save-outputs", type=Path, help="write each command's outputs into this folder")
    ap.add_argument("--check-outputs", type=Path, help="compare the outputs with a --save-outputs folder; exit 1 "
                    "on any difference")
    ap.add_argument("--check-base", action="store_true", help="compare the outputs with --base's; exit 1 on any "
                    "difference")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sweep = args.sweep_dir or make_sweep(tmp / "sweep")
        if args.save_outputs:
            args.save_outputs.mkdir(parents=True, exist_ok=True)
            for name, text in outputs(sweep, tmp).items():
                (args.save_outputs / name).write_text(text)
            print(f"outputs written to {args.save_outputs}")
        if args.check_outputs:
            sys.exit(check(outputs(sweep, tmp), {p.name: p.read_text() for p in args.check_outputs.iterdir()}))
        if args.check_base:
            if not args.base:
                sys.exit("--check-base needs --base")
            sys.exit(check(outputs(sweep, tmp), outputs(sweep, tmp, args.base.resolve())))
        if args.repeat < 1:
            return
        size = sum(p.stat().st_size for p in (sweep / "points").glob("*.json")) / 1e6
        print(f"{sweep}: {len(list((sweep / 'points').glob('*.json')))} point records, {size:.1f} MB; load "
              f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        trees = {"this": REPO, **({"base": args.base.resolve()} if args.base else {})}       # A B A B
        print(f"{'command':10s} {'tree':5s} {'best_s':>7s} {'median_s':>8s} {'cpu_best_s':>10s} {'cpu_median_s':>12s}"
              "  wall of each run")
        for name, cmd in {"--help": ["--help"], **COMMANDS}.items():
            walls: dict[str, list[float]] = {t: [] for t in trees}
            cpus: dict[str, list[float]] = {t: [] for t in trees}
            for _ in range(args.repeat):
                for tree, path in trees.items():
                    wall, done, cpu = _run([a.format(dir=sweep, html=tmp / "report.html") for a in cmd], path)
                    if done.returncode != 0:
                        sys.exit(f"specsim {name} ({tree} tree) exited {done.returncode}:\n{done.stderr}")
                    walls[tree].append(wall)
                    cpus[tree].append(cpu)
            for tree, w in walls.items():
                print(f"{name:10s} {tree:5s} {min(w):7.2f} {statistics.median(w):8.2f} {min(cpus[tree]):10.2f} "
                      f"{statistics.median(cpus[tree]):12.2f}  " + " ".join(f"{x:.2f}" for x in w), flush=True)

if __name__ == "__main__":
    main()
