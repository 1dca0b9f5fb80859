"""The command line: the cost of training a transformer as formulas, tables and reproductions.

One module per subcommand, each with a docstring (its first paragraph is the
command's description), ``EXAMPLES``, ``add_arguments(parser)`` and
``run(args) -> int``; the options several commands share are declared once in
``options`` and read in ``values``.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from contextlib import contextmanager, redirect_stdout

from symbolic_cost import REPORT, __version__  # noqa: F401  (cli.REPORT: what an internal error asks)
from symbolic_cost.cli import answers, warm
from symbolic_cost.digits import whole_number

NAMES = ("table", "formula", "crossover", "optimize", "reproduce", "scheme", "summary", "profile", "sweep", "search",
         "inference", "lstm", "report", "calibrate", "serve", "plan")
"""The subcommands, in the order ``--help`` lists them; each is the module ``cli.NAME``."""


def __getattr__(name):
    if name == "COMMANDS":          # every command's module, imported when asked for
        return tuple(importlib.import_module(f"symbolic_cost.cli.{n}") for n in NAMES)
    raise AttributeError(name)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``symbolic-cost`` parser with every subcommand, or with ``only`` that one: a call
    imports the modules of the command it runs and no other (pandas, plotting)."""
    from symbolic_cost.cli.options import command
    parser, sub = _top()
    for name in NAMES if only is None else (only,):
        command(sub, importlib.import_module(f"symbolic_cost.cli.{name}"))
    return parser


def _top():
    """The ``symbolic-cost`` parser without its commands, and the action that takes them."""
    from symbolic_cost.cli.parser import Parser
    parser = Parser(prog="symbolic-cost", description="The cost of training a transformer (FLOPs, memory, "
                    "communication, time) as exact formulas, tables and reproductions.",
                    epilog="symbolic-cost COMMAND --help describes a command, its defaults and examples")
    parser.add_argument("--version", action="version", version=f"symbolic-cost {__version__}")
    return parser, parser.add_subparsers(dest="command", required=True, metavar="COMMAND")


def commands_parser() -> argparse.ArgumentParser:
    """The parser of a command line that names no command (``--help``, ``--version``, nothing, a
    misspelt command): every command listed with its summary, read from its module's docstring
    without importing the module (``summary_of``), so that it answers at once."""
    parser, sub = _top()
    for name in NAMES:
        sub.add_parser(name, help=summary_of(name))
    return parser


def summary_of(name: str) -> str:
    """The first paragraph of the docstring of the command ``name``'s module, read from its source
    (what ``options.command`` shows as the command's description)."""
    import ast
    from importlib.util import find_spec
    with open(find_spec(f"symbolic_cost.cli.{name}").origin, encoding="utf-8") as source:
        doc = ast.get_docstring(ast.parse(source.read()), clean=False)
    return " ".join(doc.strip().split("\n\n")[0].split())


def _chosen(argv) -> str | None:
    """The command of a command line, when its first word names one."""
    words = sys.argv[1:] if argv is None else argv
    return words[0] if words and words[0] in NAMES else None


LIMITED = ("table", "formula", "crossover", "optimize", "scheme", "summary", "profile", "inference", "lstm")
"""The commands that simplify formulas (and one configuration's): each runs under ``TIME_LIMIT``.
``sweep``, ``search``, ``report``, ``reproduce`` and ``calibrate`` do numeric work whose size
their own bounds limit."""

TIME_LIMIT = 120
"""CPU seconds a command of ``LIMITED`` may run: a formula SymPy cannot simplify in that time (the
reader's size bound keeps each value small, but values multiply in a block) is refused.  CPU time
is not load-proof: a core shared with other jobs runs slower, and the budget leaves room for the
docs' slowest example (a serving layout search, ``inference --preset llama-3-70b ... --devices 8
--requests 200``) on such a core (``docs/errors.md``)."""

SLOW = ("the command ran past its time budget: a formula too large to simplify (fix more symbols with --set "
        "or --at, or ask for a simpler --field) or a load test too long (fewer --requests)")
"""What a command past ``TIME_LIMIT`` says."""



def one_line(text: str) -> str:
    """A message on one line (a SymPy or argparse message may span several)."""
    return " ".join(str(text).split())


FLAG_OF = {"first_layers_16bit": "--fp8-16bit-layers", "last_layers_16bit": "--fp8-16bit-layers",
           "reshard_after_forward": "--no-reshard-after-forward", "master_weights": "--no-master-weights",
           "double_quant": "--no-double-quant"}
"""The options whose name is not the ``Training`` field's they set, with dashes."""


def _flag(error, argv) -> str:
    """`` (--flag-name)`` when the refused argument (``InputError.argument``, a ``Training`` field
    such as ``first_stage_layers``) came from that option of the command line (``FLAG_OF`` where
    the option is named otherwise), else nothing."""
    argument = getattr(error, "argument", None)
    flag = (FLAG_OF.get(argument) or f"--{argument.replace('_', '-')}") \
        if isinstance(argument, str) and not argument.startswith("-") else None
    words = sys.argv[1:] if argv is None else argv
    return f" ({flag})" if flag and flag in words and flag not in str(error) else ""


@contextmanager
def _held(hold: bool):
    """The standard output of a command of ``LIMITED`` held until it ends (written by ``main`` then):
    one that runs past its budget, or is refused midway, prints one line on stderr and no part of an
    answer. Other commands write as they go (a sweep's rows may not fit in memory)."""
    if not hold:
        yield io.StringIO()
        return
    held = io.StringIO()
    with redirect_stdout(held):
        yield held


def environment_refusal(environ=os.environ) -> str | None:
    """The one-line refusal of an environment variable the library sets or reads that SymPy would
    choke on (``SYMPY_CACHE_SIZE``: a whole number or ``none``, which SymPy reads as it imports);
    ``None`` when all is well.

    >>> environment_refusal({"SYMPY_CACHE_SIZE": "abc"})[:60]
    "symbolic-cost: error: SYMPY_CACHE_SIZE='abc' must be a whole"
    >>> environment_refusal({"SYMPY_CACHE_SIZE": "4096"}), environment_refusal({})
    (None, None)
    """
    size = environ.get("SYMPY_CACHE_SIZE")
    if size is None or whole_number(size) or size.strip().lower() == "none":
        return None
    return (f"symbolic-cost: error: SYMPY_CACHE_SIZE={size!r} must be a whole number of cache entries or 'none' "
            f"(SymPy reads it as it imports)")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit status: 0, 1 (a reproduction mismatched), 2 (bad input:
    one line on stderr naming the argument and the rule; also a file the system would not let it
    read or write) or 3 (an internal error: one line
    and a request to report it).  Never a traceback.  The command line the program was given
    (``argv`` left ``None``) is answered from the cache of earlier answers (``answers``) when it
    can be, or with ``SYMBOLIC_COST_WARM=on`` by a warm process (``warm``), without importing the
    formulas; an explicit ``argv`` always runs in full."""
    words = None if argv is not None else sys.argv[1:]
    refused = environment_refusal()
    if refused:
        print(refused, file=sys.stderr)
        return 2
    try:
        if words is not None and answers.answer(words):
            return 0
        status = None if words is None else warm.answer(words)
        if status is not None:
            return status
    except BrokenPipeError:             # as below: output piped into `head` and closed
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:           # as below: waiting for a warm process
        print("symbolic-cost: interrupted", file=sys.stderr)
        return 130
    from symbolic_cost.cli.parser import UsageError
    try:
        chosen = _chosen(argv)
        args = (build_parser(chosen) if chosen else commands_parser()).parse_args(argv)
        from symbolic_cost.budget import time_limit
        from symbolic_cost.cli.options import honour_overheads, honour_system_file, honour_tensor
        honour_tensor(args)
        honour_system_file(args)
        honour_overheads(args)
        limited = args.command in LIMITED
        with time_limit(TIME_LIMIT if limited else None, SLOW), _held(limited) as held, \
                answers.recording(words or []) as keep:
            status = args.run(args)
            keep(status)
        sys.stdout.write(held.getvalue())
        return status
    except SystemExit as done:          # --help
        return done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:             # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as error:
        print(one_line(error.args[0]), file=sys.stderr)
        return 2
    except (ValueError, KeyError) as error:      # checks.InputError and the library's other refusals
        message = error.args[0] if error.args else str(error)
        print(f"symbolic-cost: error: {one_line(message)}{_flag(error, argv)}", file=sys.stderr)
        return 2
    except OSError as error:            # a file the system would not let us read or write
        where = f" {error.filename!r}" if error.filename else ""
        print(f"symbolic-cost: error: cannot use{where}: {error.strerror or one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("symbolic-cost: interrupted", file=sys.stderr)
        return 130
    except Exception as error:          # a bug of ours, not of the input
        print(f"symbolic-cost: internal error: {type(error).__name__}: {one_line(error)[:300]}; {REPORT}",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
