"""Namespace trees for ``list`` and ``template list``: built from the forest, drawn like tree(1).

Each top namespace is printed on its own line and everything below it with ``├── ``,
``└── `` and ``│   `` guides, exactly as tree(1) draws directories. A namespace that shows up
again below itself (a cycle, which the webhooks prevent but a bypass can create) is drawn
once more and not followed, so a broken forest still prints.
"""

# Annotations are evaluated here (no `from __future__ import annotations`): as strings, each
# NamedTuple field cost a compile() at import, the first one 10 M instructions, 5 % of a
# `list` (docs/design-notes.md, "`list` without click").

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from kubectl_accurate.output import Printer

BRANCH, LAST, PIPE, SPACE = "├── ", "└── ", "│   ", "    "


class Tree(NamedTuple):
    name: str
    below: tuple["Tree", ...]
    repeated: bool = False
    marker: str = ""


def grow(
    top: str, step: Callable[[str], Sequence[str]], mark: Callable[[str], str] | None = None
) -> Tree:
    """The tree under ``top``, following ``step`` (children or instances); ``mark`` gives
    each namespace its markers."""

    def visit(name: str, path: frozenset[str]) -> Tree:
        marker = mark(name) if mark else ""
        if name in path:
            return Tree(name, (), repeated=True, marker=marker)
        inner = path | {name}
        return Tree(name, tuple(visit(child, inner) for child in step(name)), marker=marker)

    return visit(top, frozenset())


def lines(tree: Tree) -> Iterator[tuple[str, Tree]]:
    """(guide prefix, node) for every line of the drawing, top first."""
    yield "", tree
    yield from _below(tree, "")


def _below(tree: Tree, prefix: str) -> Iterator[tuple[str, Tree]]:
    for index, child in enumerate(tree.below):
        last = index == len(tree.below) - 1
        yield prefix + (LAST if last else BRANCH), child
        yield from _below(child, prefix + (SPACE if last else PIPE))


def draw(printer: Printer, trees: Sequence[Tree], legend: str = "") -> None:
    """The trees, each namespace followed by its markers, then ``legend`` if given."""
    for tree in trees:
        for prefix, node in lines(tree):
            marker = (f" [{node.marker}]", "dim") if node.marker else ""
            if node is tree:
                printer.line((node.name, "bold cyan"), marker)
            elif node.repeated:
                printer.line(prefix, (node.name, "red"), marker, (" (cycle)", "red"))
            else:
                printer.line((prefix, "dim"), node.name, marker)
    if legend:
        printer.line("")
        printer.line((legend, "dim"))


def to_data(tree: Tree, key: str) -> dict[str, Any]:
    """The tree as nested objects: ``{"name": ..., key: [...]}``, cycles marked."""
    data: dict[str, Any] = {"name": tree.name, key: [to_data(child, key) for child in tree.below]}
    if tree.repeated:
        data["cycle"] = True
    if tree.marker:
        data["markers"] = tree.marker.split(",")
    return data


def continued(guide: str, tree: Tree) -> str:
    """The guide for a further line about the namespace drawn after ``guide``: the lines
    of the branches around it, and of its own children below, carry on past it."""
    stem = guide[: -len(LAST)] + (SPACE if guide.endswith(LAST) else PIPE) if guide else ""
    return stem + ("│" if tree.below else "")
