"""Step-time profiles: the verify step's cost as a function of the verification batch size B.

A profile is a measured table of ``(batch_tokens, step_time_s)`` for one target model on one engine
and GPU setup, plus an optional KV-read term (seconds per KV-cache token read in a step), plus metadata
naming its source. ``SPS(B) = 1 / step_time_s(B)`` is the quantity the DSpark scheduler maximises
against (DSpark paper §3.2.2).

File format (JSON)::

    {
      "metadata": {"gpu": "H100", "model": "Llama-2-7B", "dtype": "fp16", "tp": 1,
                   "engine": "...", "source": "...", "date": "YYYY-MM-DD", "kind": "measured"},
      "lookup": "linear" | "padded",
      "kv_read_s_per_token": 0.0,             # optional, seconds per KV token read per step
      "batch_tokens": [1, 2, 4, 8, 16, ...],  # strictly increasing ints >= 1
      "step_time_s":  [...]                   # same length, finite, > 0
    }

Lookup rules: see :mod:`specsim.hardware.step_profile`, where :class:`StepTimeProfile` (re-exported here) lives;
this module reads and writes profile files, resolves bundled profiles by name and reports how a run met a
profile's measured range (:func:`range_report`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError, did_you_mean
from specsim.jsonfiles import jsonable
# The profile classes live in specsim.hardware.step_profile; their names stay importable from here.
from specsim.hardware.step_profile import (EXTRAPOLATIONS, LOOKUPS, PrefillAttentionProfile,  # noqa: F401
                                           StepTimeProfile, grid_bilinear)


#: Largest batch size a profile file may list, in tokens per step (the lookup keeps a dense table up to
#: it; real profiles stop at tens of thousands).
MAX_PROFILE_TOKENS = 2**20


#: The top-level keys of a profile file (:meth:`StepTimeProfile.to_dict`, ``prefill_attention`` of a
#: :class:`PrefillAttentionProfile`); free-form notes go in ``metadata``.
PROFILE_KEYS = frozenset({"metadata", "lookup", "extrapolate", "kv_read_s_per_token", "batch_tokens", "step_time_s",
                          "per_request_s", "prefill_attn_s_per_pair", "linear_state_s", "mixed_step_time_s",
                          "spec_step_s", "spec_request_s", "spec_zero_draft_pays", "prefill_attention"})


def load_profile(path: str | Path, lookup: str | None = None) -> StepTimeProfile:
    """Read a profile JSON file (format in the module docstring).

    Args:
        path: the JSON file.
        lookup: overrides the file's lookup rule when given.

    Raises:
        SpecsimInputError: unreadable file (missing, a folder, not UTF-8), malformed JSON, a missing
            field or one of the wrong type (batch sizes must be ints in [1, :data:`MAX_PROFILE_TOKENS`],
            times numbers, ``lookup`` / ``extrapolate`` strings, ``metadata`` an object), and the
            checks of :class:`StepTimeProfile` / :class:`PrefillAttentionProfile`.
    """
    p = Path(path)
    src = str(p)
    doc = _read_json(p)
    unknown = sorted(set(doc) - PROFILE_KEYS)
    if unknown:                      # a typo (step_times_s) was ignored without a word
        raise SpecsimInputError(src, None, unknown[0], f"a profile key, one of {sorted(PROFILE_KEYS)}"
                                f"{did_you_mean(unknown[0], PROFILE_KEYS)} (notes of your own go in metadata)")
    for key in ("batch_tokens", "step_time_s"):
        if not isinstance(doc.get(key), list):
            raise SpecsimInputError(src, None, key, "a list of numbers", _shown(doc.get(key)))
    b = _numbers(doc["batch_tokens"], src, "batch_tokens")
    t = _numbers(doc["step_time_s"], src, "step_time_s", none_ok=True)
    bad = np.flatnonzero((b != np.round(b)) | (b < 1) | (b > MAX_PROFILE_TOKENS))
    if bad.size:
        raise SpecsimInputError(src, None, f"batch_tokens[{bad[0]}]",
                                f"an int in [1, {MAX_PROFILE_TOKENS}] (tokens per step)",
                                _shown(doc["batch_tokens"][bad[0]]))
    for key, kind in (("lookup", str), ("extrapolate", str), ("metadata", dict), ("prefill_attention", dict)):
        if key in doc and not isinstance(doc[key], kind) and not (key == "prefill_attention" and doc[key] is None):
            raise SpecsimInputError(src, None, key, "a string" if kind is str else "an object", _shown(doc[key]))
    coef = {}
    for key in ("kv_read_s_per_token", "per_request_s", "prefill_attn_s_per_pair", "linear_state_s", "spec_step_s",
                "spec_request_s"):
        v = doc.get(key, 0.0)
        if type(v) not in (int, float):
            raise SpecsimInputError(src, None, key, "a number of seconds >= 0", _shown(v))
        coef[key] = float(v)
    md = dict(doc.get("metadata", {}))
    if any(k in doc for k in ("spec_step_s", "spec_request_s")) and not (coef["spec_step_s"] or coef["spec_request_s"]):
        md.setdefault("speculation_terms", "none: stated as 0 in the profile file")   # run_config.speculation_terms
    pays = doc.get("spec_zero_draft_pays", False)
    if type(pays) is not bool:
        raise SpecsimInputError(src, None, "spec_zero_draft_pays", "true or false", _shown(pays))
    coef["spec_zero_draft_pays"] = pays
    mixed = doc.get("mixed_step_time_s")
    if mixed is not None and not isinstance(mixed, list):
        raise SpecsimInputError(src, None, "mixed_step_time_s", "a list of numbers", _shown(mixed))
    common = dict(
        batch_tokens=b.astype(np.int64), step_time_s=t,
        lookup=lookup or doc.get("lookup", "linear"),
        extrapolate=doc.get("extrapolate", "error"),
        metadata=md, source=src, **coef,
        mixed_step_time_s=None if mixed is None else _numbers(mixed, src, "mixed_step_time_s", none_ok=True),
    )
    pa = doc.get("prefill_attention")
    if pa is None:
        return StepTimeProfile(**common)
    for key in ("num_layers", "chunk_tokens", "context_tokens", "ms_per_layer"):
        if key not in pa:
            raise SpecsimInputError(src, None, f"prefill_attention.{key}", "a required field", "nothing (missing)")
    nl = pa["num_layers"]
    if type(nl) is not int or not 1 <= nl <= 10_000:
        raise SpecsimInputError(src, None, "prefill_attention.num_layers", "an int in [1, 10000]", _shown(nl))
    grids = {k: _numbers(pa[k], src, f"prefill_attention.{k}", nested=k == "ms_per_layer")
             for k in ("chunk_tokens", "context_tokens", "ms_per_layer")}
    charged = pa.get("charged_ms_per_token_per_layer", 0.0)
    if type(charged) not in (int, float):
        raise SpecsimInputError(src, None, "prefill_attention.charged_ms_per_token_per_layer", "a number",
                                _shown(charged))
    return PrefillAttentionProfile(
        **common, num_layers=nl, prefill_chunk_tokens=grids["chunk_tokens"],
        prefill_context_tokens=grids["context_tokens"], prefill_ms_per_layer=grids["ms_per_layer"],
        charged_ms_per_token_per_layer=float(charged))


def _read_json(p: Path) -> dict:
    """A profile file's JSON object; every way of failing to read one is a SpecsimInputError."""
    src = str(p)
    try:
        doc = json.loads(p.read_bytes())
    except FileNotFoundError:
        raise SpecsimInputError(src, None, None, "an existing profile file", "no such file") from None
    except OSError as e:
        raise SpecsimInputError(src, None, None, "a readable profile file", e.strerror or type(e).__name__) from None
    except json.JSONDecodeError as e:
        raise SpecsimInputError(src, e.lineno, None, "valid JSON", e.msg) from None
    except UnicodeDecodeError:
        raise SpecsimInputError(src, None, None, "a JSON file (UTF-8 text)", "undecodable bytes") from None
    except (ValueError, RecursionError) as e:        # an int of > 4,300 digits; nesting too deep
        raise SpecsimInputError(src, None, None, "JSON that Python can read",
                                str(e).split(";")[0][:60] or type(e).__name__) from None
    if not isinstance(doc, dict):
        raise SpecsimInputError(src, None, None, "a JSON object", type(doc).__name__)
    return doc


def _shown(v: object) -> str:
    """A short display form of a JSON value for messages."""
    text = json.dumps(v) if isinstance(v, (bool, int, float, str, type(None))) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _numbers(values: object, src: str, key: str, none_ok: bool = False, nested: bool = False) -> np.ndarray:
    """``values`` (a JSON list of numbers, a list of such lists if ``nested``) as float64; null -> NaN
    where ``none_ok`` (a time left out, refused later as not finite). Raises naming ``key[i]``."""
    rows = values if nested else [values]
    if not isinstance(values, list) or (nested and not all(isinstance(r, list) for r in rows)):
        raise SpecsimInputError(src, None, key, "a list of lists of numbers" if nested else "a list of numbers",
                                _shown(values))
    for r, row in enumerate(rows):
        for i, v in enumerate(row):
            ok = (type(v) in (int, float) and abs(v) < 1e300) or (none_ok and v is None)
            if not ok:
                where = f"{key}[{r}][{i}]" if nested else f"{key}[{i}]"
                raise SpecsimInputError(src, None, where, "a number", _shown(v))
    if nested and len({len(r) for r in rows}) > 1:
        raise SpecsimInputError(src, None, key, "rows of equal length", "ragged rows")
    a = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64)
    return a if nested else a[0]


#: How many times the slowest plausible step (:func:`slowest_plausible_step_s`) a profile's step may take before
#: :func:`step_time_slips` asks whether its times were written in milliseconds.
STEP_SLIP_FACTOR = 10.0


def slowest_plausible_step_s(batch_tokens) -> np.ndarray:
    """The slowest verify step of B tokens that a served model takes, seconds, from the bundled profiles' physics.

    A weight-read term, ``min(0.75 s, 0.1 s * B**0.6)`` (a step of a few tokens reads the weights once: 91 ms for
    Llama-2-70B on one A100 at B = 1; an MoE reads more experts as B grows, 0.67 s for DeepSeek-V3 on one H100 at
    B = 120), plus ``0.65 ms`` of compute per token (Llama-2-70B on one A100: 2.47 s at B = 4,096). Every step of
    every bundled profile lies under it (at most 0.91 of it, a100-llama2-70b-tp1 at B = 1).

    Args:
        batch_tokens: (n,) batch sizes B, tokens >= 1.

    Returns:
        (n,) seconds.
    """
    b = np.asarray(batch_tokens, dtype=float)
    return np.minimum(0.75, 0.1 * b ** 0.6) + 0.65e-3 * b


def step_time_slips(profile: StepTimeProfile) -> list[str]:
    """A line naming the profile's file and its first step time above :data:`STEP_SLIP_FACTOR` times
    :func:`slowest_plausible_step_s` (milliseconds written as seconds: 7 for a 7 ms step), asking "did you mean
    ms?"; empty when every step is plausible. A warning, not an error: a run goes on with the times as given.
    """
    b, t = profile.batch_tokens, np.asarray(profile.step_time_s, dtype=float)
    bound = STEP_SLIP_FACTOR * slowest_plausible_step_s(b)
    over = np.flatnonzero(t > bound)
    if not over.size:
        return []
    i, bi = int(over[0]), int(b[int(over[0])])
    more = f" (and {over.size - 1} more point{'s' * (over.size > 2)})" if over.size > 1 else ""
    return [f"{profile.source}, field 'step_time_s[{i}]': {t[i]:g} s for a step of {bi:,} token"
            f"{'s' * (bi > 1)}{more} is more than {STEP_SLIP_FACTOR:g}x the slowest step a served model takes "
            f"there ({bound[i] / STEP_SLIP_FACTOR:.3g} s; the slowest bundled step at one token is 91 ms, Llama-2-70B "
            f"on one A100): did you mean ms? ({t[i]:g} ms is step_time_s = {t[i] * 1e-3:g}; step times are seconds)"]


def profile_label(profile: StepTimeProfile) -> str:
    """A profile's name for a message: its metadata's ``name``, else its file's stem."""
    return (getattr(profile, "metadata", None) or {}).get("name") or Path(str(profile.source)).stem


def range_report(profile: StepTimeProfile, steps, gamma: int) -> dict[str, Any]:
    """How a run's steps met the edges of the profile's measured range.

    Args:
        profile: the run's profile.
        steps: the run's steps frame (``batch_tokens``, ``num_decode``, ``verified_drafts``, ``prefill_tokens``
            columns, :data:`specsim.engine.records.STEP_COLUMNS`).
        gamma: the run's block length.

    Returns:
        ``{"measured_batch_tokens": [first, last], "extrapolate": rule, "steps_padded_to_first": n1,
        "steps_capped_at_last": n2, "notices": [str, ...]}`` (a run adds ``eager_steps`` and ``eager_share``:
        :func:`specsim.hardware.capture.eager_report`): n1 counts steps with B below the first measured
        size (costed at its time); n2 counts, under ``extrapolate="error"``, decode steps whose verification
        batch (requests + verified drafts) is exactly the last measured size while drafts were left
        unverified, i.e. a scheduler that scores B stopped at the table's edge. One notice line per non-zero
        count, one on a speculating run's speculation overhead (:func:`speculation_notice`: what it charges and
        where that came from, issue 20), and one when the profile is marked ``superseded_by``.
    """
    first, last = int(profile.batch_tokens[0]), profile.max_batch_tokens
    b = np.asarray(steps["batch_tokens"], dtype=np.int64)
    r = np.asarray(steps["num_decode"], dtype=np.int64)
    v = np.asarray(steps["verified_drafts"], dtype=np.int64)
    decode_b = r + v
    padded = int(np.count_nonzero((b > 0) & (b < first)))
    capped = 0
    if profile.extrapolate == "error" and gamma > 0:
        capped = int(np.count_nonzero((r > 0) & (decode_b == last) & (v < r * gamma)))
    notices = []
    if capped:
        notices.append(f"the policy was capped by the profile's measured range: {capped} of {b.size} steps "
                       f"stopped at B = {last}, its last measured size, with drafts left; set "
                       "\"extrapolate\": \"linear\" in the profile to score beyond it")
    if padded:
        notices.append(f"{padded} of {b.size} steps ran below the profile's measured range (B < {first}) and "
                       f"were costed at B = {first}'s time (padded up to the first measured size)")
    md, name = profile.metadata or {}, profile_label(profile)
    if gamma > 0:
        notices.append(speculation_notice(profile))
    if md.get("superseded_by"):
        notices.append(f"the profile {name} is superseded by {md['superseded_by']} (kept to reproduce earlier "
                       "results; docs/profiles.md says why)")
    return {"measured_batch_tokens": [first, last], "extrapolate": profile.extrapolate,
            "steps_padded_to_first": padded, "steps_capped_at_last": capped, "notices": notices}


#: Where :func:`specsim.run_config.speculation_terms` says a term came from when the profile states none.
SOURCED_SPECULATION = "vLLM issue 49548's sourced defaults (the profile states none)"
#: Those defaults, seconds (:class:`specsim.hardware.stepmodel.EngineTerms`' ``spec_step_s``, ``spec_request_s``;
#: docs/profiles.md gives their derivation).
SOURCED_SPEC_STEP_S, SOURCED_SPEC_REQUEST_S = 7.75e-4, 8.4e-5


#: What docs/validation.md measured of a bundled profile's speed-ups with speculation's terms at their sourced
#: defaults, and the ``spec_step_s`` its second protocol fits on each speculative series' N = 1 point
#: (``specsim.studies.validation``; a test reads both from docs/validation.md): said where a run on the profile
#: charges those defaults.
VALIDATED_SPECULATION = {
    "b200-qwen3.8-27b-vllm-fitted": (
        "validated against this profile's public B200 sweep (docs/validation.md, 'Misses and their causes'): MTP "
        "k = 2's speed-up over no speculation comes out 3-11% low at every load (128 HumanEval users: 1.02 "
        "predicted, 1.14 measured; the 0.084 ms per running request, measured on H100, is an upper bound for this "
        "engine), DSpark k = 7's within -2% to +9%; spec_step_s fitted on the sweep's one-user point: MTP --set "
        "engine.spec_step_s=3.921e-4 (HumanEval) or 3.054e-4 (MathReasoning), DSpark 9.972e-4 (HumanEval) or "
        "5.646e-4 (MathReasoning), which leaves MTP up to 10% low at 128 users"),
}


def speculation_overhead(profile: StepTimeProfile) -> dict[str, Any]:
    """What a speculating run on ``profile`` (its terms as :func:`specsim.run_config.speculation_terms`
    resolved them) is charged per speculative step: ``{"spec_step_s", "spec_request_s"}`` in seconds and
    ``"source"``, where they came from (a run's summary and a sweep's records keep it)."""
    md = profile.metadata or {}
    source = md.get("speculation_terms") or ("the profile's own (step model)" if "step_model" in md
                                             else "the profile's own")
    if "step_model" in md and not md.get("speculation_terms") and (profile.spec_step_s, profile.spec_request_s) == (
            SOURCED_SPEC_STEP_S, SOURCED_SPEC_REQUEST_S):      # a step model built with the defaults, not fitted
        source = ("the profile's step model at vLLM issue 49548's sourced defaults (measured on a 31B dense target, "
                  "1x H100 NVL; not fitted to this model)")
        if md.get("name") in VALIDATED_SPECULATION:
            source += "; " + VALIDATED_SPECULATION[md["name"]]
    return {"spec_step_s": float(profile.spec_step_s), "spec_request_s": float(profile.spec_request_s),
            "source": str(source), "zero_draft_pays": bool(profile.spec_zero_draft_pays)}


def speculation_text(overhead: dict[str, Any], name: str | None = None) -> str:
    """The notice for a speculation overhead (:func:`speculation_overhead`'s dict; ``name``: the profile's): the
    values charged and where they came from, a warning that none was charged, or the sourced defaults used."""
    step, req, source = overhead["spec_step_s"], overhead["spec_request_s"], overhead["source"]
    on = f" on the profile {name}" if name else ""
    if not (step or req):
        return (f"the run charges no speculation overhead{on} ({source}; spec_step_s, spec_request_s: rejection "
                "sampling, draft bookkeeping, docs/profiles.md), so speculative steps cost a plain step plus the "
                "drafter and the speed-up at load comes out high (docs/validation.md) unless the profile's step "
                "times already hold it; set engine.spec_step_s and engine.spec_request_s to charge it (vLLM issue "
                "49548's: 7.75e-4 s and 8.4e-5 s)")
    text = (f"speculation's own overhead{on}: {step * 1e3:.3g} ms per speculative step + {req * 1e3:.2g} ms per "
            f"running request, {source}")
    if "zero_draft_pays" in overhead:         # (records written before the key: said nothing of it)
        text += ("; a step that drafts nothing pays it too (spec_zero_draft_pays)" if overhead["zero_draft_pays"]
                 else "; a step that drafts nothing runs the plain path without it (spec_zero_draft_pays false; "
                      "the summary's undrafted_steps counts them; engine.spec_zero_draft_pays sets it)")
    if source == SOURCED_SPECULATION:
        text += ("; docs/profiles.md; set engine.spec_step_s, engine.spec_request_s and engine.spec_zero_draft_pays "
                 "to change them")
    return text


def speculation_notice(profile: StepTimeProfile) -> str:
    """:func:`speculation_text` of ``profile``'s resolved terms, naming it (one line of a speculating run's
    notices: :func:`range_report`)."""
    return speculation_text(speculation_overhead(profile), profile_label(profile))


def save_profile(profile: StepTimeProfile, path: str | Path) -> None:
    """Write ``profile`` as JSON (format in the module docstring)."""
    Path(path).write_text(json.dumps(jsonable(profile.to_dict()), indent=1) + "\n")   # strict JSON: NaN as null


def sps_rise_points(profile: StepTimeProfile, min_rel: float = 0.0) -> np.ndarray:
    """Measured batch sizes where SPS rises again as B grows (the step time drops below the previous
    measured point's by more than ``min_rel``): the non-monotone points of the sawtooth.

    Args:
        min_rel: the smallest relative drop counted, a fraction in [0, 1).
    Returns:
        (k,) int array of batch sizes (the larger B of each falling pair).
    Raises:
        SpecsimInputError: ``min_rel`` outside [0, 1).
    """
    if isinstance(min_rel, bool) or not isinstance(min_rel, (int, float)) or not 0.0 <= min_rel < 1.0:
        raise SpecsimInputError(None, None, "min_rel", "a fraction in [0, 1)", repr(min_rel))
    t = profile.step_time_s
    drop = t[1:] < t[:-1] * (1.0 - min_rel)
    return profile.batch_tokens[1:][drop]


def bundled_profiles_dir() -> Path:
    """The folder of profiles shipped inside the package (``specsim/data/profiles``)."""
    return Path(__file__).resolve().parent.parent / "data" / "profiles"


def resolve_profile(name_or_path: str, lookup: str | None = None) -> StepTimeProfile:
    """Load a bundled profile by name (file stem in ``specsim/data/profiles``) or a profile file by path.

    Raises:
        SpecsimInputError: neither a bundled name nor an existing file; names the closest bundled names.
    """
    p = Path(name_or_path)
    if p.suffix == ".json" and p.exists():
        return load_profile(p, lookup)
    bundled = bundled_profiles_dir() / f"{name_or_path}.json"
    if bundled.exists():
        return load_profile(bundled, lookup)
    import difflib
    names = sorted(x.stem for x in bundled_profiles_dir().glob("*.json"))
    close = difflib.get_close_matches(str(name_or_path), names, n=3, cutoff=0.5)
    hint = (f"closest: {', '.join(close)}" if close else f"{len(names)} of them") + "; specsim profile list shows all"
    raise SpecsimInputError(None, None, "profile", f"a profile file (.json) or a bundled profile name ({hint})",
                            repr(name_or_path))
