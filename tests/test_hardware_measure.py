"""torch profiler: skips without torch, except in the CI torch phase (CI=true and SPECSIM_TORCH=1)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from specsim.hardware.profile import resolve_profile


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        if os.environ.get("CI", "").lower() == "true" and os.environ.get("SPECSIM_TORCH") == "1":
            pytest.fail("CI torch phase but torch is not installed")
        pytest.skip("torch not installed")


def test_core_imports_without_torch():
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None; import specsim.hardware, specsim.hardware.measure, "
            "specsim.cli.profile_cmd; print('ok')")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"


@pytest.mark.torch
def test_measure_tiny_cpu():
    _torch()
    from specsim.hardware.measure import measure_profile
    p = measure_profile("specsim-tiny", (1, 64), "cpu", warmup=1, repeats=3, num_threads=1)
    assert p.metadata["kind"] == "measured" and np.all(p.step_time_s > 0)
    assert p.step_time(64) > p.step_time(1) * 0.5


def test_bundled_cpu_profile():
    p = resolve_profile("cpu-specsim-tiny")
    assert p.metadata["model"] == "specsim-tiny" and p.batch_tokens.tolist()[:3] == [1, 2, 4]


def test_timing_warnings_flag_spread_falling_and_flat_curves():
    from specsim.hardware.measure import timing_warnings
    ms = 1e-3
    steady = [[0.45 * ms] * 3, [0.5 * ms] * 3, [0.55 * ms] * 3, [0.6 * ms] * 3, [0.8 * ms] * 3, [1.29 * ms] * 3]
    assert timing_warnings([1, 4, 8, 16, 32, 64], steady) == []           # a plausible CPU curve
    spread = timing_warnings([1, 2], [[1 * ms, 1 * ms, 5 * ms], [1.1 * ms] * 3])
    assert spread == ["B=1: its 3 repeats range 1.00-5.00 ms (5.0x, more than 2x): the machine was busy while "
                      "measuring"]
    falling = timing_warnings([1, 2, 4], [[1 * ms] * 3, [1.1 * ms] * 3, [0.5 * ms] * 3])
    assert falling == ["falling curve: B=4 measured 0.50 ms, 2.2x faster than B=2 (1.10 ms): a larger batch cannot "
                       "be faster (non-physical: timing noise)"]
    # the reviewer's curve: one slow run carried to every larger B by a monotone envelope
    flat = timing_warnings([1, 2, 4, 8, 16, 32, 64], [[133.84 * ms] * 3] + [[293.41 * ms] * 3] * 6)
    assert flat == ["flat curve: B=32 measured 293.41 ms, less than 2% above B=2's 293.41 ms with 16x the tokens "
                    "(non-physical on a CPU: the smaller batches were slowed)"]
    assert timing_warnings([1, 8], [[1 * ms] * 3, [1 * ms] * 3]) == []     # 8x apart: too close to call flat
