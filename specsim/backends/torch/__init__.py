"""The torch backend: real targets, trained drafters, lossless speculative decoding, measurements.

Modules: :mod:`.corpus` (real text by domain), :mod:`.models` (targets), :mod:`.drafters` (autoregressive,
parallel and DSpark drafters), :mod:`.train` (target and drafter training), :mod:`.decode` (batched
lossless speculative decoding under specsim policies, step logs), :mod:`.measure` (acceptance curves,
calibration, step-time profiles, plots). Importing this package requires torch (``pip install torch==2.13.0``
then ``specsim[torch]``).
"""
