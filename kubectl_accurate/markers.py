"""``list --markers``: how each namespace got into its tree, the way ``kubectl hns tree`` marks
sub-namespaces with ``[s]``.

Roots, instances and broken chains show in the namespaces' labels; telling a namespace a
SubNamespace made from one grafted by a parent label alone takes the SubNamespaces, one more
LIST, which is why the markers are asked for rather than always drawn (plain ``list`` stays at
one request). A user who may not list SubNamespaces everywhere still gets the other markers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from libaccurate.forest import Forest

Marker = Callable[[str], str]
LEGEND = {
    "r": "root",
    "s": "sub-namespace made by a SubNamespace",
    "g": "grafted: a parent label without a SubNamespace",
    "i": "instance of a template",
    "!": "broken chain: 'kubectl accurate ns describe NS' says why",
}
UNKNOWN_ORIGIN = {"s": "sub-namespace (SubNamespaces could not be listed: made or grafted)"}


def made_by_subnamespaces(forest: Forest, subs: Iterable[Mapping[str, Any]]) -> set[str]:
    """Sub-namespaces whose SubNamespace lives in their parent, as the controller keeps them."""
    made = set()
    for sub in subs:
        metadata = sub.get("metadata") or {}
        node = forest.get(metadata.get("name", ""))
        if node is not None and node.parent == metadata.get("namespace"):
            made.add(node.name)
    return made


def marker(forest: Forest, made: set[str] | None) -> Marker:
    """The markers of a namespace, joined (``r,i`` for a root that uses a template);
    ``made`` is None when the SubNamespaces are unknown."""

    def mark(name: str) -> str:
        node = forest.get(name)
        if node is None:
            return ""
        codes = []
        if forest.problem(name) is not None:
            codes.append("!")
        if node.is_root:
            codes.append("r")
        if node.parent is not None:
            codes.append("s" if made is None or name in made else "g")
        elif node.template is not None:
            codes.append("i")
        return ",".join(codes)

    return mark


def legend(made: set[str] | None) -> str:
    """One line saying what each marker means."""
    meanings = {**LEGEND, **(UNKNOWN_ORIGIN if made is None else {})}
    if made is None:
        del meanings["g"]
    return "  ".join(f"[{code}] {meaning}" for code, meaning in meanings.items())
