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
