"""The reference tables of docs/scenario-format.md, generated from the one declaration (:mod:`engine.schema.fields`).

Each table sits in the doc between two markers naming its section (``top`` is the top level)::

    <!-- reference:cluster -->
    | key | type | default | meaning |
    ...
    <!-- /reference:cluster -->

Regenerate them after changing the declaration, the bounds, the enums or the default facility::

    python -m engine.document.reference docs/scenario-format.md          # rewrite the tables in place
    python -m engine.document.reference --check docs/scenario-format.md  # exit 1 when they are out of date

``tests/engine/document/test_reference.py`` fails while the doc is out of date.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.catalog import get_item
from engine.schema.fields import AUTO, FACILITY_DEFAULT, Field, field, section_fields

TOP = "top"
_BLOCK = re.compile(r"(<!-- reference:(?P<section>[a-z_.]*) -->\n)(?P<body>.*?)(<!-- /reference:(?P=section) -->)",
                    re.DOTALL)


def _type(f: Field) -> str:
    if f.choices is not None and f.kind == "choices":
        text = "list of " + " / ".join(f"`{v}`" for v in f.choices.values())
    elif f.choices is not None:
        text = " / ".join(f"`{v}`" for v in f.choices.values())
    else:
        text = {"int": "int", "number": "number", "bool": "bool", "string": "string", "key": "catalog key",
                "object": "object", "choice": "choice"}[f.kind]
        bound = f.bound
        if bound is not None:
            text += f" {bound.range_text()}"
    if f.listed:
        text += ", a list of them"
    if f.auto:
        text += f' or `"{AUTO}"`'
    return text


def _facility_default(f: Field, specs: Mapping[str, Any]) -> str:
    """A cost's default: the default facility's figure (the catalog item ``costs.facility`` names)."""
    if f.key == "pue" and isinstance(specs.get("pue_by_cooling"), Mapping):
        liquid = specs["pue_by_cooling"].get("liquid")
        return f"{specs.get('pue', 1.0):g}; {liquid:g} for a liquid-cooled server" if liquid else f"{specs['pue']:g}"
    value = specs.get(f.key, 0.0)
    if isinstance(value, str):
        return f"`{value}`"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _default(f: Field, specs: Mapping[str, Any]) -> str:
    if f.default_text == FACILITY_DEFAULT:
        return _facility_default(f, specs)
    return f.default_words()


def _meaning(f: Field) -> str:
    text = f.help
    if f.choices is not None:
        text += ": " + ", ".join(f"`{v}` {label}" for v, label in f.choices.CHOICES)
    if f.more:
        text += f". {f.more[0].upper()}{f.more[1:]}"
    return text.replace("|", "\\|")


def table(section: str) -> str:
    """The markdown table of ``section``'s keys (``""``: the top-level keys)."""
    facility = get_item(str(field("costs.facility").default), "facility", "costs.facility")
    specs = facility.get("specs") or {}
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in section_fields(section):
        rows.append(f"| `{f.key}` | {_type(f)} | {_default(f, specs)} | {_meaning(f)} |")
    return "\n".join(rows) + "\n"


def render(text: str) -> str:
    """``text`` (the doc) with every reference block regenerated."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{table(_section(m.group('section')))}{m.group(4)}", text)


def _section(name: str) -> str:
    return "" if name == TOP else name


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or [Path("docs/scenario-format.md")]
    stale = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        fresh = render(text)
        if fresh != text:
            stale.append(str(path))
            if not check:
                path.write_text(fresh, encoding="utf-8")
    if check and stale:
        sys.stderr.write(f"out of date (run python -m engine.document.reference): {', '.join(stale)}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
