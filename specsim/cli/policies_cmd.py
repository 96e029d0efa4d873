"""``specsim policies``: every policy available, with a one-line description each.

Lists the registry (built-ins and installed packages' ``specsim.policies`` entry points) and the
plug-in files of a folder (default ``policies/``, if present): each top-level class of a ``*.py`` file
that defines ``__call__`` and each top-level function of one argument ``view``, as the ``path/file.py:Name``
spec that ``--policy`` accepts, with its knobs. Files are read with :mod:`ast`, never imported, so a broken
plug-in cannot break the listing.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import typer

from specsim import fmt
from specsim.cli import app


def plugin_files(folder: Path) -> dict[str, tuple[str, dict]]:
    """``{"folder/file.py:Name": (first docstring line, {knob: default})}`` for the policy classes of ``folder/*.py``
    and its functions of one argument ``view``, read without importing (:func:`_declared_knobs`)."""
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
                out[f"{path.as_posix()}:{node.name}"] = (_first_line(node), _declared_knobs(node, consts))
        out.update(_view_functions(tree, path))
    return out


def _declared_knobs(cls: ast.ClassDef, consts: dict[str, ast.expr]) -> dict:
    """The class body's ``knobs = {name: default}`` (or ``dict(name=default)``), each default a literal where it is
    one (a module constant's literal value for a bare name), else its source text; without one, its constructor's
    keyword parameters with defaults, ``gamma`` aside (what :func:`specsim.policies.base.declared_knobs` takes
    as knobs then); {} where it has neither."""
    def value(v: ast.expr):
        v = consts.get(v.id, v) if isinstance(v, ast.Name) else v
        try:
            return ast.literal_eval(v)
        except ValueError:
            return ast.unparse(v)

    for node in cls.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if not any(isinstance(t, ast.Name) and t.id == "knobs" for t in targets):
            continue
        v = node.value
        if isinstance(v, ast.Dict):
            return {k.value: value(x) for k, x in zip(v.keys, v.values)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict" and not v.args:
            return {kw.arg: value(kw.value) for kw in v.keywords if kw.arg}
        return {}
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return {}
    args = init.args.args[len(init.args.args) - len(init.args.defaults):]
    named = [*zip(args, init.args.defaults), *zip(init.args.kwonlyargs, init.args.kw_defaults)]
    return {a.arg: value(d) for a, d in named if d is not None and a.arg != "gamma"}


def _view_functions(tree: ast.Module, path: Path) -> dict[str, tuple[str, dict]]:
    """The top-level functions of a plug-in file that take one argument named ``view`` (a policy as a function)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and [a.arg for a in node.args.args] == ["view"]:
            out[f"{path.as_posix()}:{node.name}"] = (_first_line(node), {})
    return out


def _first_line(node: ast.ClassDef | ast.FunctionDef) -> str:
    """The first line of ``node``'s docstring as plain text (no RST backticks), "" without one."""
    doc = (ast.get_docstring(node) or "").replace("``", "").strip()
    return doc.splitlines()[0] if doc else ""


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
    rows = [[name, desc, ", ".join(f"{k}={v}" for k, v in knobs.get(name, {}).items()) or "(none)"]
            for name, desc in {**registry, **files}.items()]
    print(fmt.table(["name", "description", "knobs (defaults)"], rows, title="verification policies (--policy NAME)"))
