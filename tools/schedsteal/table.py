"""The one fixed-width table formatter of the reports (host side)."""
from __future__ import annotations


def format_table(rows, left=(0,), indent: str = "", sep: str = "  ") -> list[str]:
    """Lines of a table: every cell str()-ed, columns as wide as their
    widest cell, the columns in `left` left-aligned and the rest
    right-aligned (numbers), trailing blanks dropped."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return [(indent + sep.join(c.ljust(w) if i in left else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths)))).rstrip()
            for r in cells]
