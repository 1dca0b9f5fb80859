"""The command line's argument parser and the option types every command shares, apart from the
options themselves (``cli.options``): importing it imports nothing but ``argparse``, so that
``symbolic-cost --help`` answers without loading a command."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A command line argparse refused; ``main`` prints it as one line and exits 2."""


MAX_INTEGER = 2**53
"""Largest integer an option takes (the largest a float holds exactly)."""


def integer(minimum: int = 1, maximum: int = MAX_INTEGER):
    """An option type: an integer from ``minimum`` to ``maximum`` (``MAX_INTEGER`` unless the
    option's work grows with it).  ``type=int`` means ``integer(1)`` in every ``Parser`` (a
    size, a count, a degree), so a new integer option is checked without code of its own; an
    option that takes 0 or -1 says so."""
    largest = "2**53" if maximum == MAX_INTEGER else f"{maximum:,}"

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects an integer, got {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be an integer from {minimum} to {largest}, got {value}")
        return value
    read.__name__ = f"integer >= {minimum}"
    return read


def exact():
    """An option type: a positive exact number (``2``, ``1.25``, ``3/2``, ``1e25``) read as a
    ``Fraction``, finite as a double (an answer printed from a larger one would read ``inf``).

    >>> exact()("3/2"), exact()("1e25") == 10**25
    (Fraction(3, 2), True)
    """
    from fractions import Fraction          # here: --help imports this module and nothing else it needs
    from sys import float_info

    def read(text: str):
        try:
            value = Fraction(text.strip())
        except (ValueError, ZeroDivisionError):
            raise argparse.ArgumentTypeError(f"expects a number (e.g. 2, 1.25, 3/2 or 1e25), got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        if value > float_info.max:
            raise argparse.ArgumentTypeError(f"must be at most {float_info.max:.4g} (a double's range), got {text!r}")
        return value
    read.__name__ = "exact number"
    return read


def text(value: str) -> str:
    """The type of every option that takes text: refused when empty or blank (``--row ''`` or
    ``--hf-model ''`` would read as not given, and the option be ignored)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expects a value, got {value!r}")
    return value


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise ``UsageError`` instead of printing usage, whose
    ``type=int`` options take positive integers (``integer``) and whose text options refuse an
    empty value (``text``)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.register("type", int, integer(1))
        self.register("type", None, text)

    def add_subparsers(self, **kw):
        """The commands: the words after one are its own parser's to read (``text`` there)."""
        action = super().add_subparsers(**kw)
        action.type = str
        return action

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, after refusing an option given twice (``refuse_repeats``)."""
        import sys
        refuse_repeats(self, sys.argv[1:] if args is None else list(args))
        return super().parse_known_args(args, namespace)

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message}")


REPEATABLE = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction, argparse._ExtendAction,
              argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
"""Actions that take an option more than once (``--where``, the ``extend`` of ``--set`` and
``--grid``); every other option holds one value, which a second use would replace."""


def refuse_repeats(parser: argparse.ArgumentParser, words: list) -> None:
    """Refuse an option of ``parser`` given twice (``--preset a --preset b``, ``--zero 1 --zero 3``,
    ``--flash --no-flash``): argparse keeps the last silently, so the first would be ignored.  Words
    after a command are its own parser's, which checks them in turn.

    >>> p = Parser(prog="p"); _ = p.add_argument("--zero"); _ = p.add_argument("--set", action="extend", nargs="+")
    >>> refuse_repeats(p, ["--set", "b=1", "--set", "l=2", "--zero", "1"])
    >>> refuse_repeats(p, ["--zero", "1", "--zero=3"])
    Traceback (most recent call last):
    ...
    symbolic_cost.cli.parser.UsageError: p: error: --zero given twice: give it once (the last would replace the first)
    """
    seen = {}
    for word in words:
        if word == "--":
            break
        name = word.split("=", 1)[0]
        action = parser._option_string_actions.get(name) if word.startswith("-") else None
        if action is None or isinstance(action, REPEATABLE):
            continue
        if action.dest in seen:
            both = f"{name} given twice" if seen[action.dest] == name else f"{seen[action.dest]} and {name} both given"
            raise UsageError(f"{parser.prog}: error: {both}: give it once (the last would replace the first)")
        seen[action.dest] = name
