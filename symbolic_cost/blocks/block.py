"""``Block``: an ordered, named list of per-device Costs, and the dimension rules every block checks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Mapping

from sympy import Add, Expr, sympify

from symbolic_cost import conventions as conv
from symbolic_cost.checks import InputError, MODEL_RULES, check_rules
from symbolic_cost.cost import EXPRESSION_FIELDS, TOTAL_FIELDS, Collective, Cost, exact, substituted
from symbolic_cost.symbols import resolve_names

@dataclass(frozen=True)


class Block:
    """An ordered, named list of per-device Costs, the dimensions they were built
    from and the conventions they were counted with."""

    name: str
    rows: tuple[Cost, ...]
    dims: dict
    conventions: conv.Conventions = conv.DEFAULT

    def __iter__(self) -> Iterator[Cost]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> Cost:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"{self.name} has no row {name!r}; rows: {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [row.name for row in self.rows]

    def total(self, field: str) -> Expr:
        """Sum of one field over all rows, e.g. ``block.total("flops_fwd")``; also the two
        parts of ``flops_bwd``, ``"flops_wgrad"`` and ``"flops_agrad"`` (``cost.TOTAL_FIELDS``)."""
        if field not in TOTAL_FIELDS:
            raise InputError(f"unknown field {field!r}; fields: {', '.join(TOTAL_FIELDS)}", "field")
        return Add(*(getattr(row, field) for row in self.rows))      # one flatten, not one per row

    @property
    def collectives(self) -> list[Collective]:
        return [c for row in self.rows for c in row.collectives]

    def to_frame(self, fields=EXPRESSION_FIELDS):
        """A pandas DataFrame of the rows' expressions (one row per operation)."""
        import pandas as pd
        return pd.DataFrame([{"operation": r.name, **{f: getattr(r, f) for f in fields}}
                             for r in self.rows])

    def _repr_latex_(self) -> str:
        """Jupyter shows a Block as a LaTeX table of its main formulas."""
        from symbolic_cost.latex import formula_table
        return formula_table(self)

    def subs(self, values: Mapping) -> "Block":
        """Substitute numbers or expressions, re-checking the dimension rules."""
        values = {k: exact(v, str(k)) for k, v in resolve_names(values).items()}
        dims = {name: substituted(value, values) for name, value in self.dims.items()}
        check_dims(dims, self.conventions)
        return replace(self, rows=tuple(row.subs(values) for row in self.rows), dims=dims)

def check_dims(dims: dict, conventions: conv.Conventions) -> None:
    """Apply the layer rules (``checks.MODEL_RULES``) to whichever dimensions ``dims`` has,
    making them exact in place; presets that shard ``l`` by ``m1`` also need ``m1 | l``; a
    head size of its own (``head_dim``) frees ``e`` from being a multiple of ``h``."""
    dims.update(check_rules(dims, layer_rules(conventions, "head_dim" in dims)))


def layer_rules(conventions: conv.Conventions, head_dim: bool = False) -> tuple:
    """The ``(divisor, dividend)`` rules ``check_dims`` applies (also to sweep grids)."""
    rules = MODEL_RULES + ((("m1", "l"),) if conventions.sequence_shard == "m1" else ())
    return tuple(rule for rule in rules if rule != ("h", "e")) if head_dim else rules
