"""The ``specsim`` command: one typer app; each command family lives in its own module.

Every ``specsim/cli/*_cmd.py`` adds its commands to :data:`app` when imported (:func:`_register`). Those
modules import only the standard library, typer and :mod:`specsim.fmt` / :mod:`specsim.errors` at top level:
numpy, pandas, scipy, pyarrow, matplotlib, simpy and the simulator itself are imported inside the command
that needs them, so ``specsim --help`` and ``specsim CMD --help`` load none of them
(``tests/test_cli_startup.py`` checks it).

Exit status of :func:`main`: 0 on success; 2 for a usage error (unknown option, bad value, missing
argument) or a :class:`~specsim.errors.SpecsimInputError`, each printed as one line on stderr; 130 when
interrupted (Ctrl-C); 1 when aborted; a command's own ``typer.Exit(code)`` otherwise.
"""

from __future__ import annotations

import sys

import typer

from specsim.errors import SpecsimInputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Simulate speculative-decoding verification policies on LLM serving clusters.")

#: Exit status of a usage error or a bad input (click's usage-error status).
EXIT_USAGE = 2
#: Exit status after Ctrl-C (128 + SIGINT), as typer returns it.
EXIT_INTERRUPTED = 130


def _register() -> None:
    """Import every ``specsim/cli/*_cmd.py``: each adds its commands to ``app`` when imported."""
    import importlib
    import pkgutil

    import specsim.cli as pkg
    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if mod.endswith("_cmd"):
            importlib.import_module(f"specsim.cli.{mod}")


def _one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def _usage_error(e: typer.TyperException) -> int:
    """Print a click/typer usage error as one stderr line; return its exit status (2 for usage errors).

    ``NoArgsIsHelpError`` (a group called without a command) is the exception: typer has already printed
    the help by the time it is raised, so only a help text not yet printed (plain, non-rich mode) is shown.
    """
    msg = e.format_message()
    if type(e).__name__ == "NoArgsIsHelpError":       # as typer's rich_utils tells it, without private imports
        if msg.strip():
            print(msg, file=sys.stderr)
        return EXIT_USAGE
    ctx = getattr(e, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    print(f"specsim: error: {_one_line(msg)}{hint}", file=sys.stderr)
    return int(getattr(e, "exit_code", 1))


def main() -> None:
    """Entry point: run the app and exit with its status (see the module docstring for the codes).

    Raises:
        SystemExit: always, carrying the exit status.
    """
    try:
        _register()
        rc = app(standalone_mode=False)    # a command's return value, or the code of a typer.Exit it raised
    except SpecsimInputError as e:
        print(f"specsim: error: {_one_line(e)}", file=sys.stderr)
        rc = EXIT_USAGE
    except typer.Exit as e:                 # raised outside a command (typer returns those inside)
        rc = e.exit_code
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        rc = 1
    except KeyboardInterrupt:               # outside a command; typer turns one inside into 130 itself
        rc = EXIT_INTERRUPTED
    except typer.TyperException as e:       # click usage errors (typer vendors click)
        rc = _usage_error(e)
    sys.exit(rc if isinstance(rc, int) else 0)
