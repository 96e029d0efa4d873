"""``specsim trace``: convert public traces, draw synthetic ones, summarise a trace."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer

from specsim import fmt
from specsim.cli import app
from specsim.errors import SpecsimInputError

#: The domains of ``specsim.trace.LENGTH_MODELS``, named in ``--help`` without importing the trace module
#: (a test checks that the two agree).
DOMAINS = ("chat", "code", "math")

trace_app = typer.Typer(no_args_is_help=True,
                        help="Request traces: convert public traces, synthesise, summarise.")
app.add_typer(trace_app, name="trace")


class SourceFormat(str, Enum):
    azure = "azure"
    mooncake = "mooncake"


class Slots(str, Enum):
    burst = "burst"
    spread = "spread"


class Arrival(str, Enum):
    poisson = "poisson"
    gamma = "gamma"


def _summary_line(trace, out: Path) -> str:
    """``wrote N requests to FILE (span, content hash)`` for a written trace."""
    from specsim.trace import trace_stats

    st = trace_stats(trace)
    return (f"wrote {st['num_requests']} requests to {out} (span {st['span_s']:.3f} s, "
            f"content hash {trace.content_hash()[:12]})")


@trace_app.command("convert")
def convert(
    src: Path = typer.Argument(..., help="Input file (Azure CSV or Mooncake JSONL)."),
    out: Path = typer.Argument(..., help="Output canonical JSONL trace."),
    source_format: SourceFormat = typer.Option(..., "--from", help="Format of the input file."),
    domain: str = typer.Option(None, "--domain",
                               help="Domain of every request (Azure default: code if the file "
                                    "name says code, else chat; Mooncake default: chat)."),
    slots: Slots = typer.Option(Slots.burst, "--slots",
                                help="Mooncake 3 s timestamp slots: keep bursts or spread evenly."),
) -> None:
    """Convert an Azure LLM 2023 CSV or a Mooncake FAST'25 JSONL to the canonical JSONL."""
    from specsim.trace import convert_azure, convert_mooncake, save_trace

    if source_format is SourceFormat.azure:
        trace = convert_azure(src, domain=domain)
    else:
        trace = convert_mooncake(src, slots=slots.value, domain=domain or "chat")
    save_trace(trace, out)
    typer.echo(_summary_line(trace, out))


@trace_app.command("synth")
def synth(
    num_requests: int = typer.Option(..., "--num-requests", help="Number of requests."),
    rate: float = typer.Option(..., "--rate", help="Mean arrival rate, requests per second."),
    out: Path = typer.Option(..., "--out", help="Output canonical JSONL trace."),
    arrival: Arrival = typer.Option(Arrival.poisson, "--arrival", help="Inter-arrival law."),
    cv: float = typer.Option(None, "--cv",
                             help="Inter-arrival coefficient of variation (gamma; poisson is 1)."),
    mix: str = typer.Option("chat=1", "--mix",
                            help=f"Domain weights, e.g. chat=0.2,code=0.4,math=0.4 "
                                 f"(domains: {', '.join(DOMAINS)})."),
    seed: int = typer.Option(0, "--seed", help="The one random seed."),
    max_prompt: int = typer.Option(8192, "--max-prompt", help="Clip prompts to this many tokens."),
    max_output: int = typer.Option(2048, "--max-output", help="Clip outputs to this many tokens."),
) -> None:
    """Draw a synthetic trace with fitted per-domain lengths (see traces/README.md)."""
    from specsim.trace import save_trace, synth_trace

    if cv is None and arrival is Arrival.gamma:
        raise SpecsimInputError("--cv", None, "cv", "a value > 0 with --arrival gamma", "none")
    cv = 1.0 if cv is None else cv
    trace = synth_trace(num_requests, rate, arrival=arrival.value, cv=cv, mix=mix, seed=seed,
                        max_prompt_tokens=max_prompt, max_output_tokens=max_output)
    save_trace(trace, out)
    typer.echo(_summary_line(trace, out))


@trace_app.command("stats")
def stats(
    file: Path = typer.Argument(..., help="A canonical JSONL trace."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Count, span, rate, inter-arrival CV and per-domain prompt/output lengths of a trace."""
    from rich.console import Console
    from rich.table import Table

    from specsim.trace import load_trace, trace_stats

    trace = load_trace(file)
    st = trace_stats(trace)
    if as_json:
        typer.echo(json.dumps({"file": str(file), "content_hash": trace.content_hash(), **st}))
        return
    console = Console()
    console.print(f"[bold]{file}[/bold]  {st['num_requests']:,} requests, span "
                  f"{fmt.number(st['span_s'], 3)} s, rate {fmt.number(st['rate_req_per_s'], 3)} req/s, "
                  f"inter-arrival CV {fmt.number(st['interarrival_cv'], 3)}", soft_wrap=True)  # never wrapped
    table = Table(title="Lengths per domain (tokens; in = prompt, out = output)")
    for col in ("domain", "n", "share", "in mean", "in p50", "in p99",
                "out mean", "out p50", "out p99"):
        table.add_column(col, justify="left" if col == "domain" else "right")
    for name, row in st["domains"].items():
        table.add_row(name, fmt.value(row["num_requests"]), fmt.percent(row["num_requests"] / st["num_requests"]),
                      *(fmt.number(row[f"{k}_{s}"], 0) for k in ("prompt", "output")
                        for s in ("mean", "p50", "p99")))
    console.print(table)
