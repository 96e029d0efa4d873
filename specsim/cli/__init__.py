"""The ``specsim`` command: one typer app; each command family lives in its own module.

Every ``specsim/cli/*_cmd.py`` adds its commands to :data:`app` when imported (:func:`_register`). Those
modules import only the standard library, typer and :mod:`specsim.fmt` / :mod:`specsim.errors` at top level:
numpy, pandas, scipy, pyarrow, matplotlib, simpy and the simulator itself are imported inside the command
that needs them, so ``specsim --help`` and ``specsim CMD --help`` load none of them
(``tests/test_cli_startup.py`` checks it).

Exit status of :func:`main`: 0 on success; 2 for a usage error (unknown option, bad value, missing
argument) or a :class:`~specsim.errors.SpecsimInputError`, each printed as one line on stderr; 130 when
interrupted (Ctrl-C); 1 when aborted; a command's own ``typer.Exit(code)`` otherwise. A command that does not
succeed removes the output folders it created and left empty (:func:`specsim.cli.outputs.remove_created_if_empty`).

Only typer's public API is used (``typer.Typer``, ``typer.core.TyperGroup``, ``typer.Exit``, ``typer.Abort``):
click's usage errors are recognised by their documented interface (``format_message()``, ``exit_code``),
not by importing the click copy typer 0.29 vendors, so no typer version pin is needed.
"""

from __future__ import annotations

import atexit
import gc
import sys

import typer
from typer.core import TyperGroup

from specsim.errors import SpecsimInputError

#: Commands listed first by ``specsim --help``, in this order (the everyday path: simulate, sweep, decide, show);
#: the others follow alphabetically.
FIRST_COMMANDS = ("run", "sweep", "compare", "recommend", "plot", "report")

#: Metrics ``--goodput`` takes (vLLM's ``--goodput`` keys, as ``vllm bench serve`` names them).
GOODPUT_KEYS = ("ttft", "tpot", "itl", "e2el")


def _bare_help(cmd, ctx) -> None:
    """Show ``cmd``'s ``-h/--help`` as a bare flag (typer prints ``<bool>`` beside it, as for any flag:
    :func:`_flags_as_flags`); click caches the option it returns, so it is set once, and sub-groups' commands too."""
    opt = cmd.get_help_option(ctx) if cmd is not None else None
    if opt is not None:
        opt.metavar = ""
    if isinstance(cmd, TyperGroup):
        for name in cmd.list_commands(ctx):
            _bare_help(cmd.get_command(ctx, name), ctx)


class _Commands(TyperGroup):
    """The command list of ``specsim --help``: :data:`FIRST_COMMANDS` first, then the rest alphabetically; every
    ``--help`` a bare flag (:func:`_bare_help`)."""

    def list_commands(self, ctx) -> list[str]:
        names = list(super().list_commands(ctx))
        first = [n for n in FIRST_COMMANDS if n in names]
        return first + sorted(n for n in names if n not in first)

    def get_help_option(self, ctx):
        opt = super().get_help_option(ctx)      # its own, asked while its arguments are parsed
        if opt is not None:
            opt.metavar = ""
        return opt

    def make_context(self, info_name, args, parent=None, **extra):
        ctx = super().make_context(info_name, args, parent=parent, **extra)
        _bare_help(self, ctx)
        return ctx


app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Simulate speculative-decoding verification policies on LLM serving clusters.")


def _version(value: bool) -> None:
    if value:
        import specsim

        print(f"specsim {specsim.__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="Print specsim's version and exit.")) -> None:
    """Simulate speculative-decoding verification policies on LLM serving clusters."""

#: Exit status of a usage error or a bad input (click's usage-error status).
EXIT_USAGE = 2
#: Exit status after Ctrl-C (128 + SIGINT), as typer returns it.
EXIT_INTERRUPTED = 130


def written_to(path, what: str = "", to_stderr: bool = False) -> None:
    """Say where a command wrote a file: ``WHAT written to PATH`` (one line per file, every command).

    Args:
        path: the file or folder written.
        what: what it holds (``"summary"``, ``"figure"``), or "" for the bare path.
        to_stderr: print on stderr (commands whose stdout is JSON).
    """
    print(f"{what + ' ' if what else ''}written to {path}", file=sys.stderr if to_stderr else sys.stdout)


def _register() -> None:
    """Import every ``specsim/cli/*_cmd.py``: each adds its commands to ``app`` when imported."""
    import importlib
    import pkgutil

    import specsim.cli as pkg
    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if mod.endswith("_cmd"):
            importlib.import_module(f"specsim.cli.{mod}")
    _flags_as_flags(app)


def _flags_as_flags(group: typer.Typer) -> None:
    """Show every boolean option as a bare flag in ``--help`` (``--json``, not ``--json <bool>``).

    typer 0.29 prints a ``<bool>`` type beside flags, which reads as if a value were expected (``--json true``
    is an error); an empty metavar, set on each command's ``typer.Option`` of a ``bool`` parameter that has
    none, shows the flag alone. Sub-groups (``specsim trace ...``) are walked too.
    """
    import inspect

    for cmd in group.registered_commands:
        for p in inspect.signature(cmd.callback).parameters.values():
            info = p.default
            if p.annotation in (bool, "bool") and isinstance(info, typer.models.OptionInfo) and info.metavar is None:
                info.metavar = ""
    callback = group.registered_callback
    if callback is not None and callback.callback is not None:       # the group's own options (--version)
        for p in inspect.signature(callback.callback).parameters.values():
            if p.annotation in (bool, "bool") and isinstance(p.default, typer.models.OptionInfo) \
                    and p.default.metavar is None:
                p.default.metavar = ""
    for sub in group.registered_groups:
        _flags_as_flags(sub.typer_instance)


def _one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def vllm_goodput_args(argv: list[str]) -> list[str]:
    """Accept vLLM's ``--goodput ttft:500 tpot:10`` (one flag, several words) beside ``--goodput 'ttft:500 tpot:10'``.

    ``vllm bench serve`` declares ``--goodput`` with ``nargs="+"``; click options take one value, so every
    ``KEY:VALUE`` word (KEY in :data:`GOODPUT_KEYS`) that directly follows a ``--goodput`` value is turned
    into a repeated ``--goodput KEY:VALUE``. Anything else is left as it is.

    Args:
        argv: the command line without the program name.

    Returns:
        The command line with each such word preceded by ``--goodput``.
    """
    out: list[str] = []
    value_next = extra_ok = False       # the next word is --goodput's value / a KEY:VALUE word may follow one
    for a in argv:
        if extra_ok and a.split(":", 1)[0] in GOODPUT_KEYS and ":" in a:
            out += ["--goodput", a]
            continue
        extra_ok = (value_next and a != "--goodput") or a.startswith("--goodput=")
        value_next = a == "--goodput"
        out.append(a)
    return out


def _usage_error(e: Exception) -> int:
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
    # At exit the interpreter's last garbage collections walk every object the run made (numba's and pandas'
    # included): 0.2-0.3 s of a 3 s run (issue 25). Freezing them first skips those walks; memory goes back to
    # the OS as it does anyway, and Python never promised finalizers at exit. Every command has closed its
    # files by then.
    atexit.register(gc.freeze)
    from specsim.cli.outputs import CREATED, remove_created_if_empty
    CREATED.clear()                         # the folders this command creates for its outputs
    try:
        _register()
        rc = app(args=vllm_goodput_args(sys.argv[1:]), prog_name="specsim",
                 standalone_mode=False)    # a command's return value, or the code of a typer.Exit it raised
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
    except Exception as e:                 # click's usage errors, by their public interface (any typer version)
        if interrupted(e):
            rc = EXIT_INTERRUPTED
        elif not (callable(getattr(e, "format_message", None)) and hasattr(e, "exit_code")):
            raise
        else:
            rc = _usage_error(e)
    if rc == EXIT_INTERRUPTED:
        print("specsim: interrupted", file=sys.stderr)
    if rc not in (0, None):                 # failed or interrupted: a folder it created and left empty goes
        remove_created_if_empty()
    sys.exit(rc if isinstance(rc, int) else 0)


def interrupted(e: BaseException) -> bool:
    """Whether ``e`` is the trace of a Ctrl-C: a KeyboardInterrupt raised while compiled code was returning
    reaches Python as numba's ``SystemError`` ("returned a result with an exception set") with the
    KeyboardInterrupt as its cause or context."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False
