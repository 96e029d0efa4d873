"""``specsim policies``: every policy available, with a one-line description each.

Lists the registry (built-ins and installed packages' ``specsim.policies`` entry points) and the
plug-in files of a folder (default ``policies/``, if present): each top-level class of a ``*.py`` file
that defines ``__call__``, as the ``path/file.py:Class`` spec that ``--policy`` accepts. Files are read
with :mod:`ast`, never imported, so a broken plug-in cannot break the listing.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import typer

from specsim import fmt
from specsim.cli import app


def plugin_files(folder: Path) -> dict[str, str]:
    """``{"folder/file.py:Class": first docstring line}`` for the policy classes of ``folder/*.py``."""
    out: dict[str, str] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(f, ast.FunctionDef) and f.name == "__call__" for f in node.body):
                doc = (ast.get_docstring(node) or "").strip()
                out[f"{path.as_posix()}:{node.name}"] = doc.splitlines()[0] if doc else ""
    return out


@app.command("policies")
def policies(
    folder: Path = typer.Option(Path("policies"), "--dir", help="Folder of plug-in files to list too."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: {\"registered\": {name: "
                                 "description}, \"knobs\": {name: {knob: default}}, \"plugin_files\": "
                                 "{path:Class: description}}."),
) -> None:
    """List the available verification policies with a one-line description and their knobs' defaults each
    (set a knob with --set policy.knobs.NAME=VALUE, or [policy.knobs] in a scenario file)."""
    from specsim.policies import available_policies
    from specsim.policies.registry import policy_knobs

    registry = available_policies()
    knobs = {name: policy_knobs(name) for name in registry}
    files = plugin_files(folder)
    if as_json:
        print(json.dumps({"registered": registry, "knobs": knobs, "plugin_files": files}, indent=1, default=str))
        return
    rows = [[name, desc, ", ".join(f"{k}={v}" for k, v in knobs.get(name, {}).items()) or "-"]
            for name, desc in {**registry, **files}.items()]
    print(fmt.table(["name", "description", "knobs (defaults)"], rows, title="verification policies (--policy NAME)"))
