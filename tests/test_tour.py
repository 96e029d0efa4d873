"""Every shell block of README.md and docs/*.md runs as written (sizes cut where the block says so).

The convention (``docs/doc_blocks.md``): HTML comments on the lines right above a fenced ``bash``/``sh``
block steer this test and are invisible on a rendered page.

- ``<!-- tour: skip -- REASON -->``: the block is not run (installs, torch, long studies, golden rewrites).
- ``<!-- tour: cut "TEXT" "REPLACEMENT" -->``: ``TEXT`` is replaced before the block runs (smaller loads and
  request counts); each ``TEXT`` must occur in the block, so a cut never silently stops applying.

The blocks of one file run in order, in one fresh folder where ``traces/``, ``examples/``, ``specsim/`` and
``tests/`` point at the checkout, with this Python's ``bin`` folder first on ``PATH`` (so ``specsim``
and ``python`` are this environment's); a block fails on its first failing command (``bash -e``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|shell|console)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*tour:\s*(skip|cut)\b(.*?)-->\s*$")


def shell_blocks(path: Path) -> list[dict]:
    """The shell blocks of a Markdown file: ``{"line", "code", "skip", "cuts"}`` each (line: the fence's, 1-based).

    Raises:
        ValueError: a ``tour:`` directive that does not parse, or a cut whose text is not in its block.
    """
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        skip, cuts, j = None, [], i - 1
        while j >= 0 and DIRECTIVE.match(lines[j]):
            kind, rest = DIRECTIVE.match(lines[j]).groups()
            if kind == "skip":
                skip = rest.strip(" -") or "skipped"
            else:
                pair = shlex.split(rest)
                if len(pair) != 2:
                    raise ValueError(f"{path.name}:{j + 1}: tour: cut takes two quoted strings, got {rest!r}")
                cuts.append(tuple(pair))
            j -= 1
        end = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
        code = "\n".join(lines[i + 1:end])
        for old, new in cuts:
            if old not in code:
                raise ValueError(f"{path.name}:{i + 1}: tour: cut {old!r} is not in the block")
            code = code.replace(old, new)
        out.append({"line": i + 1, "code": code, "skip": skip, "cuts": cuts})
        i = end + 1
    return out


def test_directives_parse_and_cuts_apply():
    for path in DOCS:
        shell_blocks(path)              # raises on a bad directive or a stale cut
    tour = [b for b in shell_blocks(REPO / "README.md") if "A 5-minute tour" in b["code"] or "1. one run" in b["code"]]
    assert tour and tour[0]["skip"] is None and "--num-requests 400" not in tour[0]["code"]


def _workdir(tmp: Path) -> Path:
    for name in ("traces", "examples", "specsim", "tests"):
        (tmp / name).symlink_to(REPO / name, target_is_directory=True)
    return tmp


@pytest.mark.slow
@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_shell_blocks_run_as_written(path, tmp_path):
    blocks = [b for b in shell_blocks(path) if b["skip"] is None]
    if not blocks:
        pytest.skip(f"{path.name}: no block to run")
    cwd = _workdir(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "COLUMNS": "100", "MPLBACKEND": "Agg"}
    for b in blocks:
        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", b["code"]], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=900)
        assert p.returncode == 0, f"{path.name}:{b['line']}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
