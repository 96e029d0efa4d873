"""Per-position acceptance: the acceptance model, confidences, calibration (STS, ECE), fitting, engine counters."""
