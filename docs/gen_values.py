"""Write the Helm chart's values table in docs/install.md from charts/accurate/values.yaml.

Each row is a key with the comment right above it in values.yaml and the default it has there,
so the table can never disagree with the chart; tests/test_docs.py fails when the committed page
is not what this writes. Run it after changing values.yaml: ``.venv/bin/python docs/gen_values.py``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "charts" / "accurate" / "values.yaml"
TARGET = Path(__file__).parent / "install.md"
BEGIN = "<!-- values table: written by docs/gen_values.py from charts/accurate/values.yaml -->\n"
END = "<!-- end of the values table -->\n"
HEADER = "| key | type | default | description |\n|---|---|---|---|\n"
KEY_LINE = re.compile(r"^( *)([A-Za-z][\w-]*):")
COMMENT_LINE = re.compile(r"^ *# ?(.*)$")


def documented_keys(text: str) -> Iterator[tuple[str, str]]:
    """(dotted key, description) for every key with a comment right above it."""
    comment: list[str] = []
    path: list[tuple[int, str]] = []
    for line in text.splitlines():
        if found := COMMENT_LINE.match(line):
            comment.append(found.group(1))
            continue
        if key := KEY_LINE.match(line):
            indent = len(key.group(1))
            path = [(level, name) for level, name in path if level < indent]
            path.append((indent, key.group(2)))
            if comment:
                yield ".".join(name for _, name in path), " ".join(comment)
        comment = []


def _leaves(value: Any, prefix: str = "") -> Iterator[str]:
    """The dotted keys of the values that are not mappings."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _leaves(inner, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    found: Any = values
    for key in dotted.split("."):
        found = found[key]
    return found


def _type(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (str, "string"), (list, "list")):
        if isinstance(value, kind):
            return name
    return "object"


def table() -> str:
    """The table's rows, in the order of values.yaml; every value must be described by its
    own key's comment or an enclosing key's."""
    text = VALUES.read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    rows = list(documented_keys(text))
    described = {key for key, _ in rows}
    for leaf in _leaves(values):
        parts = leaf.split(".")
        if not any(".".join(parts[:n]) in described for n in range(1, len(parts) + 1)):
            raise SystemExit(f"{VALUES}: {leaf} has no comment to describe it")
    lines = []
    for key, description in rows:
        value = _lookup(values, key)
        lines.append(f"| `{key}` | {_type(value)} | {_default(key, value, described)} | ")
        lines.append(f"{description} |\n")
    return HEADER + "".join(lines)


def _default(key: str, value: Any, described: set[str]) -> str:
    """The default as JSON, except for a section whose keys have rows of their own."""
    if any(other.startswith(f"{key}.") for other in described):
        return "(the keys below)"
    return "`" + json.dumps(value, separators=(",", ":")).replace("|", "\\|") + "`"


def render(page: str) -> str:
    """``page`` with the part between the markers replaced by the current table."""
    before, rest = page.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}{table()}{END}{after}"


def main() -> None:
    TARGET.write_text(render(TARGET.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {TARGET}", file=sys.stderr)


if __name__ == "__main__":
    main()
