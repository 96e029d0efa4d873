"""Output paths checked before a run (issue 24 item 8): a bad ``--out`` fails in a second, not after the run.

A command calls :func:`output_dir` / :func:`output_file` on every path the user gave before it simulates.
Each refuses, with one :class:`~specsim.errors.SpecsimInputError` line (exit 2), a path it could not write:
an existing file where a folder is wanted (or the reverse), a path under a file, a place it may not write.
A missing folder is created there and then, only for the path the user gave, and the returned note says so
(the command prints it on stderr, so ``--json`` output stays one object); when the command then fails or is
interrupted before writing into it, :func:`remove_created_if_empty` removes it again. Writability is probed by creating
and removing a file, which holds for root and for read-only mounts alike (``os.access`` does not).
Standard library only: the CLI's start-up stays light (tests/test_cli_startup.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from specsim.errors import SpecsimInputError


def _probe(folder: Path, flag: str, what: str) -> None:
    """Create and remove a file in ``folder``; SpecsimInputError naming ``flag`` when that fails."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise SpecsimInputError(flag, None, None, f"{what} that can be written",
                                f"{folder} ({e.strerror or type(e).__name__})") from None


def _make_folder(folder: Path, flag: str) -> str | None:
    """Create ``folder`` (and its parents) when missing; returns a note saying so, or None when it existed."""
    if folder.is_dir():
        return None
    for above in [folder, *folder.parents]:
        if above.exists() and not above.is_dir():
            raise SpecsimInputError(flag, None, None, "a folder path (not under a file)",
                                    f"{folder} ({above} is a file)")
    missing = [d for d in [folder, *folder.parents] if not d.exists()]        # deepest first
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecsimInputError(flag, None, None, "a folder that can be created",
                                f"{folder} ({e.strerror or type(e).__name__})") from None
    CREATED.extend((d, flag) for d in missing)
    return f"created folder {folder} for {flag}"


#: The folders this command created for an output path, deepest first, with the flag (``specsim.cli.main`` empties
#: the list when a command starts and calls :func:`remove_created_if_empty` when it fails or is interrupted).
CREATED: list[tuple[Path, str]] = []


def remove_created_if_empty() -> list[Path]:
    """Remove the folders this command created (:data:`CREATED`) that are still empty, deepest first, and say so
    on stderr; returns them. A fresh user's ``specsim run --out DIR`` stopped with Ctrl-C left an empty ``DIR``
    behind; a folder that holds anything, or that existed before the command, is never touched."""
    import sys

    removed: dict[str, list[Path]] = {}
    for d, flag in CREATED:
        try:
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
                removed.setdefault(flag, []).append(d)
        except OSError:
            pass                                # a folder something else is writing into: left as it is
    CREATED.clear()
    for flag, dirs in removed.items():
        print(f"note: removed {' and '.join(str(d) for d in dirs)}, created for {flag} by this command and left "
              "empty", file=sys.stderr)
    return [d for dirs in removed.values() for d in dirs]


def output_dir(path: Path | str, flag: str) -> str | None:
    """Check (and create when missing) the output folder ``path`` given with ``flag``.

    Args:
        path: the folder the command writes its files into.
        flag: the option that named it, e.g. ``"--out"`` (for the error and the note).

    Returns:
        ``"created folder <path> for <flag>"`` when it had to be created, else None.

    Raises:
        SpecsimInputError: ``path`` is an existing file, lies under a file, or cannot be created or written.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SpecsimInputError(flag, None, None, "a folder (it holds several files), not an existing file",
                                str(p))
    note = _make_folder(p, flag)
    _probe(p, flag, "a folder")
    return note


def output_file(path: Path | str, flag: str) -> str | None:
    """Check the output file ``path`` given with ``flag`` (its folder is created when missing).

    Returns:
        ``"created folder <parent> for <flag>"`` when the parent folder had to be created, else None.

    Raises:
        SpecsimInputError: ``path`` is a folder, its parent lies under a file, or the file cannot be written.
    """
    p = Path(path)
    if p.is_dir():
        raise SpecsimInputError(flag, None, None, "a file path, not an existing folder", str(p))
    note = _make_folder(p.parent, flag)
    if p.exists():
        try:
            with open(p, "a"):
                pass
        except OSError as e:
            raise SpecsimInputError(flag, None, None, "a file that can be written",
                                    f"{p} ({e.strerror or type(e).__name__})") from None
    else:
        _probe(p.parent, flag, "a folder")
    return note


def check_output(path: Path | str | None, flag: str, folder: bool = False) -> None:
    """:func:`output_dir` (``folder``) or :func:`output_file` of ``path`` given with ``flag``, its note printed on
    stderr; nothing when ``path`` is None (the option was not given).

    Raises:
        SpecsimInputError: as :func:`output_dir` / :func:`output_file`.
    """
    if path is None:
        return
    note = output_dir(path, flag) if folder else output_file(path, flag)
    if note:
        import sys
        print(f"note: {note}", file=sys.stderr)
