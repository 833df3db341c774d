"""Render command results as a table, JSON or YAML on stdout (``-o table|json|yaml``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import orjson
import yaml

FORMATS = ("table", "json", "yaml")
_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def error(command: str, problem: BaseException) -> None:
    """Print ``cloudzones <command>: error: <problem>`` as one line on stderr: line breaks folded, and any word of
    over 300 characters (a hostile file's 5,000-digit zone label, quoted back) cut to its first 200 and its length."""
    words = str(problem).split()
    text = " ".join(w if len(w) <= 300 else f"{w[:200]}… ({len(w):,} characters)" for w in words)
    print(f"cloudzones {command}: error: {text}", file=sys.stderr)


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """Add the shared ``-o/--output`` option."""
    parser.add_argument("-o", "--output", default="table", choices=FORMATS, help="output format (default table)")


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A plain aligned text table; ``columns`` picks and orders the keys (default: the first row's)."""
    if not rows:
        return "(none)\n"
    cols = list(columns or rows[0].keys())
    cells = [[_cell(row.get(col)) for col in cols] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(cols)]
    lines = ["  ".join(col.upper().ljust(w) for col, w in zip(cols, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple, set)):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def emit(data: Any, fmt: str, *, text: str | None = None, stream: TextIO | None = None) -> None:
    """Write ``data`` as JSON/YAML, or ``text`` (falling back to JSON) for the table format."""
    out = stream or sys.stdout
    if fmt == "json":
        # orjson: a 5,000-node report's JSON in a fraction of json's time; same layout (2-space indent, sorted keys).
        out.write(orjson.dumps(data, option=_JSON_OPTIONS, default=str).decode() + "\n")
    elif fmt == "yaml":
        out.write(yaml.safe_dump(data, sort_keys=True, default_flow_style=False))
    else:
        out.write(text if text is not None else json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def summary(doc: str | None) -> str:
    """A module docstring's first line as ``--help`` text: no ``"``cloudzones x``: "`` prefix, no reST markup."""
    line = (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""
    if line.startswith("``cloudzones") and "``: " in line:
        line = line.split("``: ", 1)[1]
    return line.replace("``", "")
