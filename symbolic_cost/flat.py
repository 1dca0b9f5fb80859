"""Trees of frozen values that still read and build under flat names.

``Training`` and ``Architecture`` are each a few values (``Pipeline``, ``Sharding``…;
``Attention``, ``Feedforward``…) where they were long lists of fields.  The old field names stay
keywords and attributes: a table ``FLAT`` maps each to ``(value field, attribute)``.
``FlatNames`` reads them (``t.zero`` is ``t.sharding.zero``), and ``with_flat`` applies flat
keywords to the values a constructor was given (``Training(zero=3)``, and ``dataclasses.replace``,
which passes the changed names beside every field).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Part:
...     x: int = 1
>>> with_flat({"part": Part()}, {"x": 2}, {"x": ("part", "x")}, {"part": Part}, "Whole")
{'part': Part(x=2)}
"""

from __future__ import annotations

from dataclasses import replace

from symbolic_cost.checks import InputError, InputTypeError, shown


class FlatNames:
    """A mixin: an attribute a class does not have is read from one of its values, as its
    ``FLAT`` table says."""

    FLAT: dict = {}

    def __init_subclass__(cls, **kwargs):
        """Each flat name the class does not define becomes a property reading its value's
        attribute: a read is one property call, where a name found only by ``__getattr__`` pays
        for the failed lookup first (model building reads ``t.m1``, ``t.zero`` ... by the thousand)."""
        super().__init_subclass__(**kwargs)
        for name, (part, attribute) in cls.FLAT.items():
            if not hasattr(cls, name):
                setattr(cls, name, property(_reader(part, attribute), doc=f"``{part}.{attribute}``"))

    def __getattr__(self, name):
        # only reached when normal lookup fails; never touches the instance for an unknown name
        # (pickle and copy ask for names such as __setstate__ before any field is set)
        if name not in type(self).FLAT:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        part, attribute = type(self).FLAT[name]
        return getattr(object.__getattribute__(self, part), attribute)


def _reader(part: str, attribute: str):
    """The getter of a flat name: ``self.<part>.<attribute>``."""
    def read(self):
        return getattr(getattr(self, part), attribute)
    return read


def with_flat(values: dict, flat: dict, table: dict, kinds: dict, owner: str) -> dict:
    """``values`` (value field -> value) with each flat keyword of ``flat`` applied to its value as
    ``table`` says; a value not of its kind (``kinds``) or a keyword not in ``table`` refused, the
    message naming ``owner``."""
    unknown = sorted(k for k in flat if k not in table)
    if unknown:
        raise InputTypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r} (its keywords: the "
                             f"fields and FLAT's names)", unknown[0])
    placed = {}
    for part, value in values.items():
        if not isinstance(value, kinds[part]):
            raise InputError(f"{part} must be a {kinds[part].__name__} value, got {shown(value)}", part)
        given = {table[k][1]: v for k, v in flat.items() if table[k][0] == part} if flat else None
        placed[part] = replace(value, **given) if given else value
    return placed
