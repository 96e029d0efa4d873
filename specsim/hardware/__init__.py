"""Hardware side of specsim: step-time profiles (SPS(B) curves) and drafter cost models.

Modules: ``profile`` (table, lookup, file format), ``vidur`` / ``attention`` (import from Vidur's
measured operators), ``splitwise`` (splitwise-sim decode steps), ``analytic`` (roofline generator),
``measure`` (torch profiler, torch imported lazily), ``drafter`` (drafter costs), ``gpus`` (datasheets).
"""

from specsim.hardware.profile import (PrefillAttentionProfile, StepTimeProfile, bundled_profiles_dir,
                                      load_profile, resolve_profile, save_profile, sps_rise_points)

__all__ = ["PrefillAttentionProfile", "StepTimeProfile", "bundled_profiles_dir", "load_profile",
           "resolve_profile", "save_profile", "sps_rise_points"]
