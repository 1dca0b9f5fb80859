"""MkDocs hook: docstring examples (``>>>`` lines and their output) are shown as code.

The docstrings hold doctests in plain reStructuredText style, not in fenced blocks; read as
Markdown their ``>>>`` would be quotes and an output such as ``['a', 'b']`` a link.  This
hook adds a Markdown preprocessor, used by the pages and by mkdocstrings alike, that fences
every doctest (from its first ``>>>`` line to the next blank line) as ``pycon``.
"""

from __future__ import annotations

import re

from markdown import Extension
from markdown.preprocessors import Preprocessor

PROMPT = re.compile(r"^(\s*)>>> ")
FENCE = re.compile(r"^\s*(```|~~~)")


class DoctestBlocks(Preprocessor):
    def run(self, lines):
        out, fenced, i = [], False, 0
        while i < len(lines):
            line = lines[i]
            if FENCE.match(line):
                fenced = not fenced
            prompt = PROMPT.match(line)
            if fenced or not prompt:
                out.append(line)
                i += 1
                continue
            indent, block = prompt.group(1), []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
        return out


class DoctestExtension(Extension):
    def extendMarkdown(self, md):
        md.preprocessors.register(DoctestBlocks(md), "doctest_blocks", 35)


def on_config(config):
    config.markdown_extensions.append(DoctestExtension())
    return config
