"""Drafter cost models: fractions of the target step, or a drafter profile."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.drafter import DrafterCost, drafter_cost
from specsim.hardware.profile import StepTimeProfile

TARGET = StepTimeProfile(np.array([1, 64, 1024]), np.array([0.010, 0.012, 0.030]))


def test_fraction_models():
    # dflash (parallel): 0.010 x (0.14 + 0.002 x 4) at R=1
    assert drafter_cost("dflash").draft_time_s(1, 4, TARGET) == pytest.approx(0.010 * 0.148)
    # semi-AR over parallel at gamma 15 is +0.015 of a step (DSpark paper §4.3.2 order of magnitude)
    extra = drafter_cost("dspark").draft_time_s(64, 15, TARGET) - drafter_cost("dflash").draft_time_s(64, 15, TARGET)
    assert extra == pytest.approx(0.012 * 0.001 * 15)
    assert drafter_cost("eagle3").draft_time_s(64, 3, TARGET) == pytest.approx(0.012 * 0.028 * 3)
    assert drafter_cost("none").draft_time_s(64, 3, TARGET) == 0.0
    with pytest.raises(SpecsimInputError):
        drafter_cost("medusa")


def test_drafter_profile_models():
    d = StepTimeProfile(np.array([1, 1024]), np.array([0.001, 0.003]))
    par = DrafterCost("parallel", 0, 0, drafter_profile=d)
    assert par.draft_time_s(64, 4, TARGET) == pytest.approx(np.interp(256, [1, 1024], [0.001, 0.003]))
    ar = DrafterCost("autoregressive", 0, 0, drafter_profile=d)
    assert ar.draft_time_s(64, 4, TARGET) == pytest.approx(4 * np.interp(64, [1, 1024], [0.001, 0.003]))
    semi = DrafterCost("semi-autoregressive", 0, 0, drafter_profile=d, head_fraction=0.001)
    assert semi.draft_time_s(64, 4, TARGET) == pytest.approx(par.draft_time_s(64, 4, TARGET) + 4 * 0.001 * 0.012)
