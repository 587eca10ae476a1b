"""Reading a leaderboard back off a screen, as a user reads it.

The header cells, and each row's cells by header; a name folded over
several lines of its row is joined again.
"""

from __future__ import annotations

Row = dict[str, str]


def leaderboard_of(lines: list[str]) -> tuple[list[str], list[Row]]:
    """The headers of the one table among ``lines``, and its rows."""
    header_lines = [
        line.strip().strip("┃").split("┃") for line in lines if _is(line, "┃")
    ]
    headers = [
        " ".join(part.strip() for part in column if part.strip())
        for column in zip(*header_lines, strict=True)
    ]
    rows: list[Row] = []
    for line in lines:
        if not _is(line, "│"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if cells[0]:  # a rank: a new row
            rows.append(dict(zip(headers, cells, strict=True)))
        else:  # the rest of a folded name
            rows[-1]["model"] += cells[headers.index("model")]
    return headers, rows


def _is(line: str, border: str) -> bool:
    return line[:1] == border
