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


def plugin_files(folder: Path) -> dict[str, tuple[str, dict]]:
    """``{"folder/file.py:Class": (first docstring line, {knob: default})}`` for the policy classes of
    ``folder/*.py``, read without importing: a class's ``knobs = {...}`` literal, a default naming a module-level
    constant shown as that constant's value (as the source writes it where it is not a plain literal)."""
    out: dict[str, tuple[str, dict]] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        consts = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(f, ast.FunctionDef) and f.name == "__call__" for f in node.body):
                doc = (ast.get_docstring(node) or "").strip()
                out[f"{path.as_posix()}:{node.name}"] = (doc.splitlines()[0] if doc else "",
                                                         _declared_knobs(node, consts))
    return out


def _declared_knobs(cls: ast.ClassDef, consts: dict[str, ast.expr]) -> dict:
    """The class body's ``knobs = {name: default}``, each default a literal where it is one (a module constant's
    literal value for a bare name), else its source text; {} where the class declares none as a dict."""
    for node in cls.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == "knobs" for t in targets) and isinstance(node.value, ast.Dict):
            out = {}
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    v = consts.get(v.id, v) if isinstance(v, ast.Name) else v
                    try:
                        out[k.value] = ast.literal_eval(v)
                    except ValueError:
                        out[k.value] = ast.unparse(v)
            return out
    return {}


@app.command("policies")
def policies(
    folder: Path = typer.Option(Path("policies"), "--dir", help="Folder of plug-in files to list too."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: {\"registered\": {name: "
                                 "description}, \"knobs\": {name: {knob: default}}, \"plugin_files\": "
                                 "{path:Class: description}}."),
) -> None:
    """List the available verification policies with a one-line description and their knobs' defaults each
    (set a knob with --set policy.knobs.NAME=VALUE, or in a scenario file's policy.knobs table)."""
    from specsim.policies import available_policies
    from specsim.policies.registry import policy_knobs

    registry = available_policies()
    knobs = {name: policy_knobs(name) for name in registry}
    found = plugin_files(folder)
    files = {spec: doc for spec, (doc, _) in found.items()}
    knobs.update({spec: declared for spec, (_, declared) in found.items()})
    if as_json:
        print(json.dumps({"registered": registry, "knobs": knobs, "plugin_files": files}, indent=1, default=str))
        return
    rows = [[name, desc, ", ".join(f"{k}={v}" for k, v in knobs.get(name, {}).items()) or "-"]
            for name, desc in {**registry, **files}.items()]
    print(fmt.table(["name", "description", "knobs (defaults)"], rows, title="verification policies (--policy NAME)"))
