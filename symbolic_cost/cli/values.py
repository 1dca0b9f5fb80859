"""What the options mean, gathered for the commands: ``--set`` values and the other settings
read from the command line (``cli.parse``), the model, its default configuration and the block
a block command builds (``cli.building``), the symbols those blocks read and the options a
command cannot honour (``cli.bookkeeping``), and the fields it can report with numbers in the
chosen units (``cli.units``).  New code may import from those modules directly.

Every formula typed on the command line (``--set``, ``--at``, ``--by``, ``--where``) is
read by the safe reader (``symbolic_cost.reader``), never evaluated as Python.  Options a
command cannot honour are refused, never ignored (``honour``).
"""

from __future__ import annotations

from symbolic_cost.cli.bookkeeping import (block_symbols, honour, honour_blocks, honour_mtp, honour_system,
                                           numbers_needed, present, symbols_of)
from symbolic_cost.cli.building import (DEFAULT_SEQUENCE, TRAINING_SYMBOLS, architecture, block_values, build_block,
                                        conventions, conventions_text, model_block, model_type, sequence_length,
                                        tensor_grid, tensor_grid_builders, training_values)
from symbolic_cost.cli.parse import (MAX_GRID, assignments, grid_option, grid_values, parse_condition, parse_set,
                                     resolve, substituted, symbol_name, symbol_names)
from symbolic_cost.cli.units import FIELDS, amount, field_expr, field_kind, field_type, finite, header, number

__all__ = ["parse_set", "assignments", "parse_condition", "substituted", "resolve", "MAX_GRID", "grid_option",
           "grid_values", "symbol_name", "symbol_names", "DEFAULT_SEQUENCE", "TRAINING_SYMBOLS", "architecture", "sequence_length",
           "training_values", "block_values", "conventions", "conventions_text", "build_block", "model_block",
           "tensor_grid_builders", "tensor_grid", "symbols_of", "honour", "block_symbols", "honour_blocks",
           "honour_mtp", "honour_system", "present", "numbers_needed", "FIELDS", "field_type", "field_expr",
           "field_kind", "number", "finite", "amount", "header"]
