"""``specsim scenario``: what a scenario TOML file may hold: every key with its type and default (``keys``), and
the JSON Schema of the file (``schema``) for editors and linters, both generated from :mod:`specsim.scenario`; and
``check``, one file loaded as a run loads it: its errors, its warnings, the keys it changes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app, written_to

scenario_app = typer.Typer(no_args_is_help=True, help="Scenario files: every key with its default; the JSON Schema; "
                           "check one file.")
app.add_typer(scenario_app, name="scenario")


@scenario_app.command("keys")
def keys() -> None:
    """Every scenario key (section.key) with its type and default (specsim/scenarios/default.toml gives sources)."""
    from specsim.scenario_schema import describe_scenario

    rows = [list(re.match(r"(\S+): (.*) = (.*)$", line).groups()) for line in describe_scenario().splitlines()]
    for row in rows:
        if row[2] == "None":
            row[2] = f"unset: {unset_meaning(row[0])}"
    print(fmt.table(["key", "type", "default"], rows, title="scenario keys (--set section.key=value)",
                    notes=["unset: leave the key out (TOML has no null); `specsim scenario schema` gives each key's "
                           "meaning, specsim/scenarios/default.toml its source"]))


def unset_meaning(key: str) -> str:
    """What a scenario key left unset means, from its section's docstring (``None = ...`` or ``unset = ...``
    to the end of that clause, parentheses left out), e.g. ``engine.max_model_len`` -> "the model's own"; "see
    its description" where the docstring says nothing of it."""
    from specsim.scenario import SECTIONS
    from specsim.scenario_schema import _attribute_docs

    section, _, name = key.partition(".")
    doc = _attribute_docs(SECTIONS[section]).get(name, "")
    while re.search(r"\([^()]*\)", doc):                   # parentheses out (nested ones too): the gist only
        doc = re.sub(r" ?\([^()]*\)", "", doc)
    m = re.search(r"(?:None|unset) = (.*?)(?:[.;:](?:\s|$)|$)", doc)
    return m.group(1).strip() if m else "see its description"


@scenario_app.command("schema")
def schema(
    out: Optional[Path] = typer.Option(None, "--out", help="Write the schema to this file instead of stdout."),
) -> None:
    """The JSON Schema of a scenario TOML file (docs/scenario.schema.json is this output)."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from specsim.scenario_schema import scenario_schema

    text = json.dumps(scenario_schema(), indent=1) + "\n"
    if out is None:
        print(text, end="")
        return
    out.write_text(text)
    written_to(out, "scenario schema")


@scenario_app.command("check")
def check(
    scenario: Path = typer.Argument(..., help="Scenario TOML file."),
    set_: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
) -> None:
    """Load a scenario file (and --set items) as specsim run does, with its profile: an error exits 2; otherwise the
    keys whose values differ from the defaults, the profile, and the warnings a run would print."""
    from specsim.cli.sweep_notes import note_unit_warnings
    from specsim.hardware.profile import profile_label, resolve_profile
    from specsim.run_config import check_prefill_chunk, in_scenario_file
    from specsim.scenario import load_scenario

    scen = load_scenario(scenario, set_)
    with in_scenario_file(scen):
        prof = resolve_profile(scen.profile.name, scen.profile.lookup)
        check_prefill_chunk(scen, prof)
    default = load_scenario().to_dict()
    rows = [[f"{name}.{key}", repr(value)] for name, section in scen.to_dict().items()
            for key, value in section.items() if default[name].get(key) != value]
    step = f"its step at one request takes {float(prof.step_time(1, num_requests=1)) * 1e3:.3g} ms"
    print(fmt.table(["key", "value"], rows, title=f"scenario {scenario}: {len(rows)} keys differ from the defaults",
                    notes=[f"profile {profile_label(prof)} ({prof.source}): {step}"]))
    note_unit_warnings(scen, prof)
