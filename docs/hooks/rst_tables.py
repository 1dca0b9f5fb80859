"""MkDocs hook: reStructuredText simple tables in docstrings are shown as tables.

The package's docstrings hold tables in reStructuredText's simple form, which reads well in
``help()`` and in the source::

    ======== ==================
    setting  meaning
    ======== ==================
    ``b``    micro-batch size
    ``l``    sequence length, a
             row's second line
    ======== ==================

Read as Markdown (by the pages and by mkdocstrings alike) the borders would be heading
underlines and the rows one run-on paragraph.  This hook adds a Markdown preprocessor that
rewrites each such table as a Markdown table: the columns are the runs of ``=`` of its first
border; the header is what stands between the first two borders when rows follow the second (a
table of rows only ends at its second border, and its Markdown header is left empty); a line
whose first column is blank continues the row above; the last column runs to the end of its line.
"""

from __future__ import annotations

import re

from markdown import Extension
from markdown.preprocessors import Preprocessor

BORDER = re.compile(r"^(\s*)=+(?: +=+)+\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def columns(border: str) -> list[tuple[int, int | None]]:
    """``(start, end)`` of each column of a border line; the last column has no end."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", border)]
    return [(start, end if i < len(spans) - 1 else None) for i, (start, end) in enumerate(spans)]


def cells(line: str, spans) -> list[str]:
    """The text of ``line`` under each column (the last to the end of the line)."""
    out = []
    for i, (start, end) in enumerate(spans):
        stop = spans[i + 1][0] if i + 1 < len(spans) else None
        out.append(line[start:stop].strip())
    return out


def rows(lines: list[str], spans) -> list[list[str]]:
    """Rows of a table's body: a line whose first column is blank continues the row above."""
    found = []
    for line in lines:
        if not line.strip():
            continue
        parts = cells(line, spans)
        if parts[0] or not found:
            found.append(parts)
        else:
            found[-1] = [f"{old} {new}".strip() for old, new in zip(found[-1], parts)]
    return found


def markdown_table(header: list[list[str]], body: list[list[str]], indent: str, width: int) -> list[str]:
    def line(parts):
        return indent + "| " + " | ".join(p.replace("|", "\\|") for p in parts) + " |"
    heading = [" ".join(column).strip() for column in zip(*header)] if header else [""] * width
    return [line(heading), indent + "|" + "---|" * len(heading), *(line(r) for r in body)]


def convert(lines: list[str]) -> list[str]:
    """``lines`` with every simple table (border, header, border, rows, border) as a Markdown one;
    anything else, fenced code included, unchanged."""
    out, i, fenced = [], 0, False
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            fenced = not fenced
        match = None if fenced else BORDER.match(line)
        borders = [j for j in range(i + 1, len(lines)) if lines[j].strip() == line.strip()][:2] if match else []
        if not borders:
            out.append(line)
            i += 1
            continue
        spans = columns(line)
        after = borders[0] + 1
        if len(borders) == 2 and after < len(lines) and lines[after].strip():   # a header, then the rows
            header, body, end = rows(lines[i + 1:borders[0]], spans), rows(lines[after:borders[1]], spans), borders[1]
        else:                                                                   # rows only
            header, body, end = [], rows(lines[i + 1:borders[0]], spans), borders[0]
        out += ([""] if out and out[-1].strip() else []) + markdown_table(header, body, match.group(1), len(spans)) + [""]
        i = end + 1
    return out


class SimpleTables(Preprocessor):
    def run(self, lines):
        return convert(lines)


class SimpleTablesExtension(Extension):
    def extendMarkdown(self, md):
        md.preprocessors.register(SimpleTables(md), "rst_simple_tables", 36)


def on_config(config):
    config.markdown_extensions.append(SimpleTablesExtension())
    return config
