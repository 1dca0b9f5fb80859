"""The exact numbers ``numeric.exact`` computes with, and their way back to SymPy.

``RATIONAL`` is GMP's ``gmpy2.mpq`` where gmpy2 is installed (a dependency where it has wheels), else
``fractions.Fraction``: both are exact, and the arithmetic of ``mpq`` is written in C, about
ten times that of ``Fraction`` (whose additions and products were three quarters of a
whole model's exact evaluation).  Integers stay Python ``int`` (or GMP's ``mpz`` after a
``floor``).  ``to_sympy`` turns a result into a SymPy ``Integer``/``Rational`` without
SymPy's cached constructor, which costs more than the arithmetic of a configuration.
"""

from __future__ import annotations

from fractions import Fraction

from sympy import Expr, Float, Integer, Rational

try:
    from gmpy2 import mpq as RATIONAL
except ImportError:                     # a machine without gmpy2's wheels
    RATIONAL = Fraction

_SPECIAL = (-1, 0, 1)


def is_whole(value) -> bool:
    """Whether an exact number (int, ``mpz``, ``mpq``, ``Fraction``) is an integer."""
    return isinstance(value, int) or getattr(value, "denominator", None) == 1


def to_sympy(value) -> Expr:
    """``value`` (an exact result, or a float where a formula is irrational) as a SymPy number.

    >>> to_sympy(RATIONAL(6, 4)), to_sympy(12), to_sympy(RATIONAL(4, 2)), to_sympy(0.5)
    (3/2, 12, 2, 0.500000000000000)
    >>> to_sympy(RATIONAL(6, 4)) == Rational(3, 2) and hash(to_sympy(7)) == hash(Integer(7))
    True
    """
    if type(value) is int:                            # the common cases first
        return _integer(value)
    if type(value) is not RATIONAL:
        if isinstance(value, bool):
            return Integer(value)
        if isinstance(value, int):
            return _integer(int(value))
        if not hasattr(value, "denominator"):         # a float, where a formula is irrational
            return Float(value)
    p, q = int(value.numerator), int(value.denominator)      # mpq, mpz, Fraction
    if q == 1:
        return _integer(p)
    if q == 2 and p == 1:
        return Rational(1, 2)                         # SymPy's singleton Half
    number = _bare(Rational)                          # already in lowest terms, q > 0
    number.p, number.q = p, q
    return number


def _integer(i: int) -> Expr:
    if i in _SPECIAL:
        return Integer(i)                             # SymPy's singletons, compared with ``is``
    number = _bare(Integer)
    number.p = i
    return number


def _bare(cls, new=object.__new__):
    """An empty SymPy number of ``cls``: what ``Basic.__new__`` sets with no arguments (its
    assumptions, no hash yet, no args), without the call (half the cost of a result)."""
    number = new(cls)
    number._assumptions, number._mhash, number._args = cls.default_assumptions, None, ()
    return number
