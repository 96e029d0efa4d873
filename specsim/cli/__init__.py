"""The ``specsim`` command: one typer app; each command family lives in its own module."""

from __future__ import annotations

import sys

import typer

from specsim.errors import SpecsimInputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Simulate speculative-decoding verification policies on LLM serving clusters.")


def _register() -> None:
    """Import every ``specsim/cli/*_cmd.py``: each adds its commands to ``app`` when imported."""
    import importlib
    import pkgutil

    import specsim.cli as pkg
    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if mod.endswith("_cmd"):
            importlib.import_module(f"specsim.cli.{mod}")


def main() -> None:
    """Entry point: run the app; input errors print one line and exit with status 2."""
    _register()
    try:
        app(standalone_mode=False)
    except SpecsimInputError as e:
        print(f"specsim: error: {e}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("Aborted.", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # click usage errors
        import click
        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(2)
        raise
