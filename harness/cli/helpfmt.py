"""The help formatter of every parser: lines break at spaces and after commas, never inside
a token, so names such as iperf3.pps1400 or container-container stay whole however narrow
the terminal (argparse's own wraps with textwrap, which breaks after hyphens and inside
long words: `iperf\\n3.pps1400`, `container-\\ncontainer`).

Descriptions and epilogs keep the line breaks they were written with and have each line
wrapped the same way, under its own indentation; a table row (a term, two or more spaces,
its text) wraps its text under itself. Help strings are one paragraph, as argparse makes
them."""

from __future__ import annotations

import argparse
import re

_PIECE = re.compile(r"[^,]+,?|,")        # a word cut after each comma
_TERM = re.compile(r"(\s*)(\S+ {2,})(\S.*)")   # a table row: a term, two or more spaces, its text


def wrap(text: str, width: int) -> list[str]:
    """`text` as lines of at most `width` characters, broken only at whitespace and after a
    comma; a piece longer than `width` stands alone on its line, whole."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        for i, piece in enumerate(_PIECE.findall(word)):
            sep = " " if i == 0 and line else ""
            if line and len(line) + len(sep) + len(piece) > width:
                lines.append(line)
                line = piece
            else:
                line += sep + piece
    if line:
        lines.append(line)
    return lines


class HelpFormatter(argparse.HelpFormatter):
    """argparse.HelpFormatter wrapping at spaces and commas only (the module doc)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap(text, max(width, 1))

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for line in text.splitlines():
            if not line.strip():
                out.append("")
                continue
            row = _TERM.fullmatch(line)
            if row:          # the text wraps under itself, beside its term
                lead = indent + row[1]
                first, rest = lead + row[2], " " * (len(lead) + len(row[2]))
                body = row[3]
            else:
                first = rest = indent + line[:len(line) - len(line.lstrip())]
                body = line
            for i, w in enumerate(wrap(body, max(width - len(first), 1))):
                out.append((rest if i else first) + w)
        return "\n".join(out)
