"""Whole numbers written as text, read without SymPy (the command line's start and the page's
server read them before, or without, importing it)."""

from __future__ import annotations


def whole_number(text: str) -> bool:
    """Whether ``text``, spaces around it aside, is a whole number in ASCII digits: ``str.isdigit``
    alone takes ``"²"``, which ``int`` refuses, and ``"٣"``, which ``int`` reads as 3.

    >>> whole_number(" 42 "), whole_number("²"), whole_number("٣"), whole_number("-1"), whole_number("")
    (True, False, False, False, False)
    """
    text = text.strip()
    return text.isascii() and text.isdigit()
