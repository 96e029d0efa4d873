"""Hardware side of specsim: step-time profiles (SPS(B) curves) and drafter cost models."""

from specsim.hardware.profile import StepTimeProfile, load_profile, resolve_profile, save_profile

__all__ = ["StepTimeProfile", "load_profile", "resolve_profile", "save_profile"]
