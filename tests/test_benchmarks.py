"""Smoke tests of the benchmark scripts: they run on tiny sizes, exit 0 and print their rows and verdicts.

No timing assertions (timings depend on the machine); only that the scripts work end to end through the
public API, with or without the shared folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_dir

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"


def _run(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a benchmark script with this interpreter; wide COLUMNS so no line wraps."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    out = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                         env=full_env, timeout=300)
    assert out.returncode == 0, f"{script} exited {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out


def _rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("with_floor", [True, False])
def test_bench_engine_quick(tmp_path, with_floor):
    if with_floor and not (shared_dir() / "bench" / "floor_bench.py").is_file():
        pytest.skip("shared folder with bench/floor_bench.py not found (set SPECSIM_SHARED)")
    env = {} if with_floor else {"SPECSIM_SHARED": str(tmp_path / "no-shared")}
    out = _run("bench_engine.py", "--quick", "--r-targets", "8,16", env=env)
    rows = _rows(out.stdout)
    table = {(r[0], r[1]): r for r in rows if r[0] in ("dspark", "none") and r[1].startswith("R=")}
    assert set(table) == {(p, f"R={t}") for p in ("dspark", "none") for t in (8, 16)}
    for (policy, target), r in table.items():
        mean_r = float(r[3])
        assert abs(mean_r / int(target[2:]) - 1) <= 0.10, r    # the load search hit the 10% band
        assert int(r[4]) > 0                                   # steps
    verdicts = [line for line in out.stdout.splitlines() if line.startswith("verdict ")]
    assert len(verdicts) == 4
    if with_floor:
        assert all(("MET" in v) or ("MISSED" in v) for v in verdicts)
        assert all(r[7] != "-" and r[8] != "-" for r in table.values())   # floor speed and ratio printed
    else:
        assert "floor part skipped" in out.stdout
        assert all("not judged" in v for v in verdicts)


def test_bench_growth_quick():
    out = _run("bench_growth.py", "--quick", "--sizes", "150,300")
    lines = out.stdout.splitlines()
    assert lines[0].startswith("saturation: ")
    rows = {r[0]: r for r in _rows(out.stdout) if r[0].isdigit()}
    assert set(rows) == {"150", "300"}
    from specsim.workload import synth_trace
    for n, r in rows.items():
        lengths = synth_trace(int(n), 1.0, seed=0)          # the load's lengths (its rate only moves arrivals)
        beyond = int((lengths.prompt_tokens + lengths.output_tokens > 4096).sum())   # Llama-2-7B's window
        assert (int(r[1]), int(r[2])) == (int(n) - beyond, beyond) and beyond > 0    # the rest completed
    assert any(line.startswith("verdict growth: wall time per request 300/150") for line in lines)
    assert any(line.startswith("verdict memory: largest peak RSS") for line in lines)


def test_bench_engine_fails_loudly_outside_the_band(tmp_path, monkeypatch, capsys):
    """A measured mean R that no load brings within 10% of the target stops the benchmark with status 2."""
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_engine

    monkeypatch.setenv("SPECSIM_SHARED", str(tmp_path / "no-shared"))
    monkeypatch.setattr(bench_engine, "mean_running", lambda steps: 100.0)   # every load "runs" 100 requests
    assert bench_engine.main(["--quick", "--r-targets", "4"]) == 2
    err = capsys.readouterr().err
    assert "outside the 10% band" in err and "dspark at R=4: measured mean R 100.0" in err


def test_step_phases_quick():
    """The phase table of 60 requests of the main job: every wrapped phase of the slow path is called once per
    planned step, and the loop's steps are those the run reports; ``--whole`` lists each part of a process."""
    out = _run("step_phases.py", "main", "--requests", "60").stdout
    head = next(line for line in out.splitlines() if line.startswith("where the time goes (main)"))
    steps = int(head.split(" steps")[0].split()[-1])
    calls = {re.split(r"\s{2,}", line.strip())[0]: int(line.split("(")[-1].split()[0])
             for line in out.splitlines() if line.rstrip().endswith("calls)")}
    assert steps > 60 and calls["plan"] == calls["policy decide"] == calls["finish (emit, record)"] == steps
    whole = _run("step_phases.py", "main", "--requests", "60", "--whole").stdout
    for part in ("interpreter start", "imports", "event loop", "exit (interpreter teardown)"):
        assert part in whole
