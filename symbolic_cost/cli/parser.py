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
            value = int(ascii_only(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects an integer, got {quoted(text)}") from None
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
            value = Fraction(ascii_only(text).strip())
        except (ValueError, ZeroDivisionError):
            raise argparse.ArgumentTypeError(f"expects a number (e.g. 2, 1.25, 3/2 or 1e25), got "
                                             f"{quoted(text)}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {quoted(text)}")
        if value > float_info.max:
            raise argparse.ArgumentTypeError(f"must be at most {float_info.max:.4g} (a double's range), got "
                                             f"{quoted(text)}")
        return value
    read.__name__ = "exact number"
    return read


QUOTED = 60
"""Characters of a refused value a message quotes (a megabyte's value was quoted whole)."""


def quoted(value) -> str:
    """``repr(value)`` for a refusal, cut to ``QUOTED`` characters: ``checks.shown``'s rule, written
    here because this module is imported without SymPy (``--help``), which ``checks`` imports.

    >>> quoted("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."
    """
    text = repr(value)
    return text if len(text) <= QUOTED else text[:QUOTED - 3] + "..."


def ascii_only(text: str) -> str:
    """``text`` where it is ASCII, else argparse's refusal of the option's value: ``int``,
    ``float`` and ``Fraction`` read other scripts' digits (``"٣"`` as 3, ``"８"`` as 8), which
    ``--set`` refuses; every number option refuses them alike.

    >>> ascii_only("8")
    '8'
    """
    if not text.isascii():
        raise argparse.ArgumentTypeError(f"expects a number in ASCII digits, got {quoted(text)}")
    return text


def decimal(text: str) -> float:
    """The type of ``type=float`` options: ``float`` of ASCII text only (``ascii_only``)."""
    try:
        return float(ascii_only(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a number, got {quoted(text)}") from None


def text(value: str) -> str:
    """The type of every option that takes text: refused when empty or blank (``--row ''`` or
    ``--hf-model ''`` would read as not given, and the option be ignored)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expects a value, got {quoted(value)}")
    return value


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise ``UsageError`` instead of printing usage, whose
    ``type=int`` options take positive integers (``integer``), ``type=float`` ones ASCII numbers
    (``decimal``), and whose text options refuse an empty value (``text``)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.register("type", int, integer(1))
        self.register("type", float, decimal)
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

    def add_argument(self, *flags, **kw):
        """argparse's, noting the option (``noted``)."""
        return noted(self, super().add_argument(*flags, **kw), kw.get("action"))

    def add_argument_group(self, *args, **kw):
        """argparse's group, whose options are noted as the parser's own are."""
        return noting(self, super().add_argument_group(*args, **kw))

    def add_mutually_exclusive_group(self, **kw):
        """argparse's exclusive group, whose options are noted as the parser's own are."""
        return noting(self, super().add_mutually_exclusive_group(**kw))

    def _check_value(self, action, value):
        """argparse's refusal of a value not among ``choices``, quoting the value cut (``quoted``)."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {quoted(value)} (choose from {choices})")

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message}")


REPEATABLE = ("append", "append_const", "count", "extend", "help", "version")
"""Actions that take an option more than once (``--where``, the ``extend`` of ``--set`` and
``--grid``); every other option holds one value, which a second use would replace."""


def noted(parser, action, kind) -> argparse.Action:
    """``action`` with its option strings noted in ``parser.single_options`` (option -> its
    destination) when it holds one value (its ``kind`` not ``REPEATABLE``)."""
    if not hasattr(parser, "single_options"):
        parser.single_options = {}
    if kind not in REPEATABLE:
        parser.single_options.update(dict.fromkeys(action.option_strings, action.dest))
    return action


def noting(parser, group):
    """``group`` with its ``add_argument`` noting each option in ``parser`` (``noted``), and the
    groups made inside it (an exclusive group of a titled one) noting theirs."""
    add, exclusive = group.add_argument, group.add_mutually_exclusive_group

    def add_argument(*flags, **kw):
        return noted(parser, add(*flags, **kw), kw.get("action"))

    def add_mutually_exclusive_group(**kw):
        return noting(parser, exclusive(**kw))
    group.add_argument, group.add_mutually_exclusive_group = add_argument, add_mutually_exclusive_group
    return group


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
    seen, single = {}, getattr(parser, "single_options", {})
    for word in words:
        if word == "--":
            break
        name = word.split("=", 1)[0]
        dest = single.get(name) if word.startswith("-") else None
        if dest is None:
            continue
        if dest in seen:
            both = f"{name} given twice" if seen[dest] == name else f"{seen[dest]} and {name} both given"
            raise UsageError(f"{parser.prog}: error: {both}: give it once (the last would replace the first)")
        seen[dest] = name
