"""Request traces, one module per concern (data flows trace -> jsonl / converters / lengths -> synth):

* :mod:`~specsim.workload.trace`: the :class:`Trace` columns, their checks, :func:`trace_stats`;
* :mod:`~specsim.workload.jsonl`: the canonical JSONL format (:func:`load_trace`, :func:`save_trace`);
* :mod:`~specsim.workload.converters`: Azure, Mooncake, BurstGPT, column-mapped tables, lengths CSVs;
* :mod:`~specsim.workload.lengths`: per-domain length models (:data:`LENGTH_MODELS`);
* :mod:`~specsim.workload.synth`: the synthetic generator (:func:`synth_trace`).

Every public name is importable from here (``from specsim.workload import load_trace``); submodules load on
first use.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the submodule that defines it
_EXPORTS = {
    "DEFAULT_DOMAIN": "trace", "Trace": "trace", "trace_stats": "trace",
    "FIELDS": "jsonl", "KNOWN_FIELDS": "jsonl", "OWN_PREFIX": "jsonl", "MAX_COUNT": "jsonl",
    "load_trace": "jsonl", "save_trace": "jsonl",
    "MAX_WALL_SPAN_S": "wall_times", "MOONCAKE_BLOCK_TOKENS": "converters", "SLOTS": "converters",
    "convert_azure": "converters", "convert_burstgpt": "converters", "convert_mooncake": "converters",
    "convert_table": "converters", "load_lengths_csv": "converters", "parse_column_map": "converters",
    "parse_wall_times": "wall_times",
    "LENGTH_MODELS": "lengths", "LengthModel": "lengths", "fit_length_models": "lengths",
    "parse_length_spec": "lengths", "parse_mix": "lengths", "truncated_lognormal_mean": "lengths",
    "ARRIVALS": "synth", "synth_trace": "synth",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Load a public name from its submodule on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'specsim.workload' has no attribute {name!r}")
    return getattr(importlib.import_module(f"specsim.workload.{_EXPORTS[name]}"), name)
