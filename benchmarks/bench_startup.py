"""Start-up time of the CLI: ``specsim --help``, ``specsim policies`` and ``specsim run --help``.

Each command runs in a fresh subprocess (a cold interpreter, warm file cache) ``--repeat`` times (default 5);
the fastest wall time is reported (the least disturbed by other work on the machine), and beside it the
fastest CPU time (user + system of the child, from ``getrusage(RUSAGE_CHILDREN)``), steadier on a busy
machine. The ``specsim`` console script installed beside this interpreter is used; where there is none,
``python -c "from specsim.cli import main; main()"`` stands in for it. A bare ``python -c pass`` is timed
the same way as the interpreter's own start-up, for reference.

Target (issue 11): ``specsim --help`` under 0.5 s.

Run: ``python benchmarks/bench_startup.py``; ``--quick`` times each command twice; ``--check`` exits 1 when
the target is missed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

HELP_LIMIT_S = 0.5


def specsim_command() -> list[str]:
    """The argv prefix that runs the specsim CLI: the console script beside this interpreter, if installed."""
    script = shutil.which("specsim", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-c", "from specsim.cli import main; main()"]


def _children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished children (0.0 where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:
        return 0.0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def best_times_s(argv: list[str], repeat: int) -> tuple[float, float]:
    """Fastest wall time and fastest CPU time (user + system) of ``repeat`` fresh runs of ``argv``, seconds.

    Raises:
        SystemExit: the command exited non-zero (its stderr is shown).
    """
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        cpu0, t0 = _children_cpu_s(), time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True)
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, _children_cpu_s() - cpu0)
        if out.returncode != 0:
            raise SystemExit(f"bench_startup: {' '.join(argv)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return best_wall, best_cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 runs per command")
    ap.add_argument("--repeat", type=int, default=None, help="runs per command, fastest kept (default 5)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = ap.parse_args(argv)
    repeat = max(1, args.repeat or (2 if args.quick else 5))
    cli = specsim_command()
    rows = [("python -c pass", *best_times_s([sys.executable, "-c", "pass"], repeat), None)]
    for label, extra, limit in [("specsim --help", ["--help"], HELP_LIMIT_S),
                                ("specsim policies", ["policies"], None),
                                ("specsim run --help", ["run", "--help"], None)]:
        rows.append((label, *best_times_s(cli + extra, repeat), limit))
    print(f"{'command':<20} {'best wall s':>11} {'best cpu s':>10} {'target':>8}   (best of {repeat})")
    for label, wall, cpu, limit in rows:
        print(f"{label:<20} {wall:>11.3f} {cpu:>10.3f} {('< ' + format(limit, '.1f')) if limit else '-':>8}")
    help_s, help_cpu = rows[1][1], rows[1][2]
    ok = help_s < HELP_LIMIT_S
    print(f"verdict specsim --help: {help_s:.3f} s wall ({help_cpu:.3f} s cpu), target < {HELP_LIMIT_S} s: "
          f"{'MET' if ok else 'MISSED'}")
    return 1 if (args.check and not ok) else 0


if __name__ == "__main__":
    sys.exit(main())
