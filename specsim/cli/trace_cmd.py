"""``specsim trace``: convert public traces, draw synthetic ones, summarise a trace."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app
from specsim.errors import SpecsimInputError

#: The domains of ``specsim.workload.lengths.LENGTH_MODELS``, named in ``--help`` without importing the trace module
#: (a test checks that the two agree).
DOMAINS = ("chat", "code", "math")

trace_app = typer.Typer(no_args_is_help=True,
                        help="Request traces: convert public traces, synthesise, summarise.")
app.add_typer(trace_app, name="trace")


class SourceFormat(str, Enum):
    azure = "azure"
    mooncake = "mooncake"
    burstgpt = "burstgpt"
    table = "table"
    sharegpt = "sharegpt"


class Slots(str, Enum):
    burst = "burst"
    spread = "spread"


class Arrival(str, Enum):
    poisson = "poisson"
    gamma = "gamma"
    constant = "constant"


def _write_synth(trace, out: Path, flag: str) -> None:
    """Write a drawn trace and print its summary line, after checking that its arrivals stay within specsim's bound
    on simulated time (a trace a run would refuse is refused here, naming ``flag``: ``--rate`` or ``--stages``)."""
    from specsim.errors import MAX_SIM_TIME_S
    from specsim.workload import save_trace

    last = float(trace.arrival_s[-1]) if len(trace) else 0.0
    if not last <= MAX_SIM_TIME_S:
        raise SpecsimInputError(flag, None, flag.lstrip("-"), f"arrivals within specsim's bound on simulated time "
                                f"({MAX_SIM_TIME_S:g} s), as a run needs",
                                f"a trace whose last arrival is at {last:.3g} s")
    save_trace(trace, out)
    typer.echo(_summary_line(trace, out))
    _window_note(trace)


def _window_note(trace, scenario: Path | None = None, overrides: list[str] | None = None) -> None:
    """On stderr, how many of a trace's requests exceed a scenario's context window (prompt + output): a run on it
    refuses them as unservable (a fresh user's session trace had 107 of 240 beyond the default profile's 4,096
    tokens, found only when the run refused them). ``scenario`` / ``overrides`` (``--set``) name the scenario;
    without them the default one, whose model may not be the user's (the note then says how to name yours).

    Raises:
        SpecsimInputError: an unreadable or invalid scenario file or ``--set`` override (from ``load_scenario``).
    """
    from specsim.hardware.context import context_window
    from specsim.hardware.profile import resolve_profile
    from specsim.scenario import load_scenario

    sc = load_scenario(scenario, overrides)
    cw = context_window(resolve_profile(sc.profile.name, sc.profile.lookup), sc.engine.max_model_len)
    over = int(cw.over(trace.prompt_tokens, trace.output_tokens).sum())
    if over:
        verb = "exceeds" if over == 1 else "exceed"
        whose = (f"scenario {scenario}'s" if scenario is not None else
                 "the default scenario's" + (" (with --set)" if overrides else ""))
        hint = ("" if scenario is not None else
                "; `specsim trace stats FILE --scenario S.toml` checks against your scenario's model")
        typer.echo(fmt.wrapped(f"note: {over} of its {len(trace)} requests {verb} {cw.max_model_len:,} tokens "
                               f"(prompt + output), {whose} context window ({cw.source}): a run "
                               "on it refuses them as unservable (--max-model-len, or a profile of a longer-context "
                               f"model, admits them{hint})"), err=True)
    elif (scenario is not None or overrides) and cw.max_model_len is None:
        typer.echo(fmt.wrapped(f"note: the scenario's context window is {cw.source}: a run refuses none of the "
                               f"{len(trace)} requests for its length (engine.max_model_len sets one)"), err=True)
    elif scenario is not None or overrides:
        typer.echo(f"note: all {len(trace)} requests fit the scenario's context window of {cw.max_model_len:,} tokens "
                   f"(prompt + output; {cw.source})", err=True)


def _summary_line(trace, out: Path) -> str:
    """``wrote N requests to FILE (span, content hash)`` for a written trace."""
    from specsim.workload.trace import trace_stats

    st = trace_stats(trace)
    n = st["num_requests"]
    return fmt.wrapped(f"wrote {n} request{'s' * (n != 1)} to {out} (span {st['span_s']:.3f} s, "
                       f"content hash {trace.content_hash()[:12]})")


#: The options of ``trace convert`` that apply to one source format only (the others apply to all).
FORMAT_OPTIONS = {"slots": "mooncake", "model": "burstgpt", "keep_failed": "burstgpt", "column_map": "table",
                  "time_unit": "table", "origin": "table", "skip_bad": "table", "rate": "sharegpt", "think": "sharegpt",
                  "tokenizer": "sharegpt", "chars_per_token": "sharegpt", "max_turns": "sharegpt", "seed": "sharegpt"}


def _check_format_options(ctx: typer.Context, source_format: str) -> None:
    """Refuse an option given for another source format (``--time-unit`` with ``--from mooncake`` was ignored).

    Raises:
        SpecsimInputError: naming the option and the format it applies to.
    """
    for p in ctx.command.params:
        owner = FORMAT_OPTIONS.get(p.name)
        given = getattr(ctx.get_parameter_source(p.name), "name", None) == "COMMANDLINE"   # (typer's own click)
        if owner and owner != source_format and given:
            flag = max(p.opts, key=len)
            raise SpecsimInputError(flag, None, None, f"{flag} with --from {owner} only (it does not apply to "
                                    f"--from {source_format})", str(ctx.params.get(p.name)))


@trace_app.command("convert")
def convert(
    ctx: typer.Context,
    src: Path = typer.Argument(..., help="Input file (Azure CSV, Mooncake JSONL, BurstGPT CSV, or any "
                                         "CSV/JSONL with --from table: JSONL where it opens with {, else CSV)."),
    out: Path = typer.Argument(..., help="Output canonical JSONL trace."),
    source_format: SourceFormat = typer.Option(..., "--from", help="Format of the input file."),
    domain: str = typer.Option(None, "--domain",
                               help="Domain of every request (Azure default: code if the file "
                                    "name says code, else chat; others: chat)."),
    slots: Slots = typer.Option(Slots.burst, "--slots",
                                help="Mooncake 3 s timestamp slots: keep bursts or spread evenly."),
    model: str = typer.Option(None, "--model", help="BurstGPT: keep only this Model (e.g. GPT-4)."),
    keep_failed: bool = typer.Option(False, "--keep-failed",
                                     help="BurstGPT: keep failed rows (Response tokens 0) as 1-token "
                                          "requests with ids <row>-failed instead of dropping them."),
    column_map: str = typer.Option(None, "--map", help="table: canonical=source columns, e.g. "
                                   "arrival_s=ts,prompt_tokens=in,output_tokens=out (also domain, "
                                   "request_id, prefix_group, prefix_tokens)."),
    time_unit: str = typer.Option("s", "--time-unit",
                                  help="table: unit of the arrival column: s, ms, us, ns, min, h or datetime."),
    origin: str = typer.Option("first", "--origin", help="table: first (from the earliest arrival), zero "
                               "(values as they are) or a number of seconds to subtract."),
    rate: float = typer.Option(1.0, "--rate", help="sharegpt: sessions started per second (Poisson)."),
    think: str = typer.Option("exp:5", "--think", help="sharegpt: think time before each later turn: const:S, "
                              "exp:MEAN, uniform:LO:HI or lognormal:MEDIAN:SIGMA (seconds)."),
    tokenizer: str = typer.Option(None, "--tokenizer", help="sharegpt: a Hugging Face tokenizer for token counts "
                                  "(used when transformers is installed; else --chars-per-token)."),
    chars_per_token: float = typer.Option(4.0, "--chars-per-token", help="sharegpt: characters per token without "
                                          "a tokenizer (OpenAI's English rule of thumb: 4)."),
    max_turns: int = typer.Option(None, "--max-turns", help="sharegpt: keep the first K turns of a session."),
    seed: int = typer.Option(0, "--seed", help="sharegpt: seed of session starts and think times."),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="table: leave out rows whose arrival, prompt or "
                                  "output tokens do not convert (counted, the first named) instead of stopping "
                                  "at the first."),
) -> None:
    """Convert a public trace (Azure LLM 2023, Mooncake FAST'25, BurstGPT), ShareGPT-style conversations (one
    session per conversation) or any CSV/JSONL table (--from table --map ...) to canonical JSONL."""
    from specsim.cli.outputs import output_file
    from specsim.workload import convert_azure, convert_mooncake, save_trace

    _check_format_options(ctx, source_format.value)
    if out.resolve() == src.resolve():
        raise SpecsimInputError(str(out), None, None, "an output path other than the input file (it would be "
                                "overwritten)", str(src))
    note = output_file(out, "OUT")
    if note:
        typer.echo(f"note: {note}", err=True)
    if source_format is SourceFormat.azure:
        trace = convert_azure(src, domain=domain)
    elif source_format is SourceFormat.mooncake:
        trace = convert_mooncake(src, slots=slots.value, domain=domain or "chat")
    elif source_format is SourceFormat.burstgpt:
        from specsim.workload import convert_burstgpt

        trace, info = convert_burstgpt(src, model=model, failed="keep" if keep_failed else "drop",
                                       domain=domain or "chat")
        kept = "kept as 1-token requests" if keep_failed else "dropped"
        typer.echo(f"{info['rows']} rows, {info['model_filtered']} of other models left out, "
                   f"{info['failed']} failed (Response tokens 0) {kept}")
    elif source_format is SourceFormat.sharegpt:
        from specsim.workload.conversations import parse_think, read_conversations, session_trace, token_counter

        count, how = token_counter(tokenizer, chars_per_token)
        convs, skipped = read_conversations(src, count)
        trace = session_trace(convs, rate=rate, think=parse_think(think), seed=seed, domain=domain or "chat",
                              max_turns=max_turns, source=str(src))
        typer.echo(f"{len(convs)} conversations ({skipped} without a full turn skipped), {len(trace)} turns; "
                   f"token counts: {how}")
    else:
        from specsim.workload import convert_table

        if column_map is None:
            raise SpecsimInputError("--map", None, "map", "a column map with --from table",
                                    "none (e.g. --map arrival_s=ts,prompt_tokens=in,output_tokens=out)")
        skipped: list[tuple] = []
        trace = convert_table(src, column_map, time_unit=time_unit, origin=origin, domain=domain or "chat",
                              on_skip=(lambda *row: skipped.append(row)) if skip_bad else None,
                              on_note=lambda text: typer.echo(fmt.wrapped(f"warning: {text}"), err=True))
        if skipped:
            line, col, value = skipped[0]
            typer.echo(f"note: {len(skipped)} bad rows left out (--skip-bad); the first: {src}, line {line}, "
                       f"field {col!r}: {value!r}", err=True)
    save_trace(trace, out)
    typer.echo(_summary_line(trace, out))
    _window_note(trace)
    _note_unknown_domains(trace)


def _note_unknown_domains(trace) -> None:
    """A note on stderr when requests carry domains no built-in acceptance table knows (a fresh user mapped an
    endpoint column to domain: the run refused the trace later): a run needs them in its scenario's table."""
    import numpy as np

    from specsim.acceptance.tables import builtin_table

    known = set(builtin_table("dspark")[0])
    doms, counts = np.unique(np.asarray(trace.domain, dtype=object), return_counts=True)
    unknown = [(d, int(c)) for d, c in zip(doms, counts) if d not in known]
    if unknown:
        shown = ", ".join(f"{d!r} ({c})" for d, c in unknown[:4]) + (" ..." if len(unknown) > 4 else "")
        typer.echo(f"note: {sum(c for _, c in unknown)} requests carry domains no built-in acceptance table knows "
                   f"({shown}); a run refuses them unless its scenario's [acceptance] rates name them: map a "
                   f"column of {', '.join(sorted(k for k in known if k in ('chat', 'code', 'math')))} or set "
                   "--domain", err=True)


@trace_app.command("synth")
def synth(
    rate: float = typer.Option(None, "--rate", help="Mean arrival rate, requests per second (or --stages)."),
    out: Path = typer.Option(..., "--out", help="Output canonical JSONL trace."),
    num_requests: int = typer.Option(None, "--num-requests",
                                     help="Number of requests (or --duration, or --questions-per-group)."),
    duration: float = typer.Option(None, "--duration", help="Seconds: every arrival in [0, duration) at --rate."),
    span: float = typer.Option(None, "--span", help="Rescale the drawn arrivals so the last is at this "
                               "many seconds (a stage duration)."),
    arrival: Arrival = typer.Option(Arrival.poisson, "--arrival", help="Inter-arrival law."),
    cv: float = typer.Option(None, "--cv",
                             help="Inter-arrival coefficient of variation (gamma; poisson is 1)."),
    mix: str = typer.Option("chat=1", "--mix",
                            help=f"Domain weights, e.g. chat=0.2,code=0.4,math=0.4 "
                                 f"(domains: {', '.join(DOMAINS)})."),
    seed: int = typer.Option(0, "--seed", help="The one random seed."),
    max_prompt: int = typer.Option(8192, "--max-prompt", help="Clip drawn prompts to this many tokens "
                                   "(--prompt-len is used as given; with --prefix-groups the shared prefix "
                                   "comes on top of the clipped question)."),
    max_output: int = typer.Option(2048, "--max-output", help="Clip drawn outputs to this many tokens "
                                   "(--output-len is used as given)."),
    output_len: str = typer.Option(None, "--output-len", help="Output length: N (fixed), uniform:LO:HI or "
                                   "maxent:MEAN:MAX (a reported mean under a max_tokens cap, spread at most entropy)."),
    prompt_len: str = typer.Option(None, "--prompt-len",
                                   help="Prompt (question) length: N (fixed) or uniform:LO:HI."),
    lengths_csv: Path = typer.Option(None, "--lengths-csv", help="Draw (prompt, output) pairs from this CSV "
                                     "(columns num_prefill_tokens,num_decode_tokens or prompt_tokens,output_tokens)."),
    prefix_groups: int = typer.Option(0, "--prefix-groups", help="Shared-prefix groups (system prompts)."),
    prefix_tokens: int = typer.Option(0, "--prefix-tokens", help="Tokens of each group's system prompt."),
    questions_per_group: int = typer.Option(None, "--questions-per-group",
                                            help="Requests per group (sets the count to groups x questions)."),
    stages: str = typer.Option(None, "--stages", help="Load stages in place of --rate and a count: RATE:SECONDS "
                               "or RATE->RATE:SECONDS (linear ramp), comma-separated, e.g. '2:60,2->8:120,8:60'; "
                               "runs report per-stage figures."),
    sessions: int = typer.Option(None, "--sessions", help="Multi-turn sessions started at --rate per second "
                                 "(each turn reuses the whole previous context; with --turns and --think)."),
    turns: int = typer.Option(2, "--turns", help="Turns per session (--sessions)."),
    think: str = typer.Option("exp:5", "--think", help="Think time before each later turn (--sessions): const:S, "
                              "exp:MEAN, uniform:LO:HI or lognormal:MEDIAN:SIGMA (seconds)."),
) -> None:
    """Draw a synthetic trace with fitted per-domain lengths (see traces/README.md)."""
    from specsim.cli.outputs import output_file
    from specsim.workload import synth_trace

    note = output_file(out, "--out")          # its folder made, as trace convert does
    if note:
        typer.echo(f"note: {note}", err=True)

    if cv is None and arrival is Arrival.gamma:
        raise SpecsimInputError("--cv", None, "cv", "a value > 0 with --arrival gamma", "none")
    cv = 1.0 if cv is None else cv
    lengths = None
    if lengths_csv is not None:
        from specsim.workload import load_lengths_csv

        lengths = load_lengths_csv(lengths_csv)
    if stages is not None:
        from specsim.workload.stages import parse_stages, staged_trace

        clash = [f for f, v in (("--rate", rate), ("--num-requests", num_requests), ("--duration", duration),
                                ("--span", span), ("--prefix-groups", prefix_groups or None)) if v is not None]
        if clash:
            raise SpecsimInputError(clash[0], None, None, "--stages alone sets the rates and durations", clash[0])
        trace = staged_trace(parse_stages(stages), arrival=arrival.value, cv=cv, seed=seed, mix=mix,
                             max_prompt_tokens=max_prompt, max_output_tokens=max_output, output_len=output_len,
                             prompt_len=prompt_len, lengths=lengths)
        _write_synth(trace, out, "--stages")
        return
    if rate is None:
        raise SpecsimInputError("--rate", None, "rate", "a rate in requests/s (or --stages)", "none")
    if sessions is not None:
        from specsim.workload.conversations import parse_think, session_trace, synthetic_conversations

        clash = [f for f, v in (("--num-requests", num_requests), ("--duration", duration), ("--span", span),
                                ("--prefix-groups", prefix_groups or None)) if v is not None]
        if clash:
            raise SpecsimInputError(clash[0], None, None, "--sessions and --turns alone set the number of requests",
                                    clash[0])

        convs = synthetic_conversations(sessions, turns, seed=seed, mix=mix, max_prompt_tokens=max_prompt,
                                        max_output_tokens=max_output, output_len=output_len, prompt_len=prompt_len)
        trace = session_trace(convs, rate=rate, think=parse_think(think), seed=seed,
                              arrival="constant" if arrival is Arrival.constant else "poisson",
                              source=f"synthetic sessions seed {seed}")
        _write_synth(trace, out, "--rate")
        return
    unused = [f for f, given in (("--turns", turns != 2), ("--think", think != "exp:5")) if given]
    if unused:
        raise SpecsimInputError(unused[0], None, unused[0].lstrip("-"), f"{unused[0]} only with --sessions",
                                "no --sessions")
    trace = synth_trace(num_requests, rate, arrival=arrival.value, cv=cv, mix=mix, seed=seed,
                        max_prompt_tokens=max_prompt, max_output_tokens=max_output, duration_s=duration,
                        span_s=span, output_len=output_len, prompt_len=prompt_len, lengths=lengths,
                        prefix_groups=prefix_groups, prefix_tokens=prefix_tokens,
                        questions_per_group=questions_per_group)
    _write_synth(trace, out, "--span" if span is not None else "--rate")
    if span is not None:
        typer.echo(span_warning(trace, rate, span), err=True)


def span_warning(trace, rate: float, span: float) -> str:
    """The warning ``trace synth --span`` prints: the arrivals were rescaled, so the trace's rate is not --rate.

    ``--span`` stretches or squeezes the drawn arrival times so the last one lands at ``span`` seconds;
    the mean rate becomes (requests - 1) / span whatever ``--rate`` was (``trace_stats``' rate).
    """
    from specsim.workload.trace import trace_stats

    st = trace_stats(trace)
    return (f"warning: --span {span:g} rescaled the arrivals: the trace's mean rate is "
            f"{fmt.number(st['rate_req_per_s'], 3)} req/s, not --rate {rate:g} (leave --span out to keep the rate)")


@trace_app.command("stats")
def stats(
    file: Path = typer.Argument(..., help="A canonical JSONL trace."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML whose context window (its "
                                            "profile's model, engine.max_model_len) the requests are checked "
                                            "against; default: the default scenario's."),
    set_: list[str] = typer.Option([], "--set", help="Scenario override: section.key=value (repeatable)."),
) -> None:
    """Count, span, rate, inter-arrival CV and per-domain prompt/output lengths of a trace; on stderr, how many
    requests exceed the scenario's context window (--scenario, --set; default: the default scenario)."""
    from specsim.workload import load_trace, trace_stats

    trace = load_trace(file)
    st = trace_stats(trace)
    if as_json:
        typer.echo(json.dumps({"file": str(file), "content_hash": trace.content_hash(), **st}))
        _window_note(trace, scenario, set_)
        return
    sessions, unit = "", "req/s"
    if st.get("arrivals") == "session starts":      # later turns arrive when a run completes the previous one
        sessions = (f" in {st['num_sessions']:,} sessions (span, rate and CV of the session starts: later turns "
                    "arrive when the previous turn completes plus its think time, in a run)")
        unit = "sessions/s"
    rows = [[name, fmt.value(row["num_requests"]), fmt.percent(row["num_requests"] / st["num_requests"]),
             *(fmt.number(row[f"{k}_{s}"], 0) for k in ("prompt", "output") for s in ("mean", "p50", "p99"))]
            for name, row in st["domains"].items()]
    print(fmt.table(["domain", "n", "share", "in mean", "in p50", "in p99", "out mean", "out p50", "out p99"], rows,
                    title=f"{file}: {st['num_requests']:,} requests{sessions}, span {fmt.number(st['span_s'], 3)} s, "
                          f"rate {fmt.number(st['rate_req_per_s'], 3)} {unit}, inter-arrival CV "
                          f"{fmt.number(st['interarrival_cv'], 3)}; lengths per domain (tokens; in = prompt, "
                          "out = output)"))
    _window_note(trace, scenario, set_)
