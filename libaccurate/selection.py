"""Per-object propagation exceptions (issue 14 item 2): where a source may be copied to.

A source narrows its own propagation with annotations, like HNC's exceptions:
``propagate-select`` (a label selector on the target namespace's labels, tree labels
included), ``propagate-tree-select`` (named namespaces and their subtrees, ``!`` to exclude)
and ``propagate-none`` (copied nowhere). An annotation that does not parse blocks the source:
nothing is copied from it and nothing is deleted because of it until it is fixed, so a typo
never wipes out copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from libaccurate.cloning import annotations_of
from libaccurate.constants import (
    ANNOTATION_PROPAGATE_NONE,
    ANNOTATION_PROPAGATE_SELECT,
    ANNOTATION_PROPAGATE_TREE_SELECT,
)
from libaccurate.forest import Forest
from libaccurate.selectors import LabelSelector, SelectorError, parse_selector
from libaccurate.validation import validate_dns1123_label

REASON_BAD_EXCEPTION = "BadPropagationException"


@dataclass(frozen=True)
class Selection:
    """The namespaces a source may be copied into; ``error`` says why it is blocked."""

    none: bool = False
    labels: LabelSelector | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    error: str | None = None

    @property
    def narrowed(self) -> bool:
        """Whether any exception applies: without one a source goes everywhere below."""
        return self != EVERYWHERE

    def allows(self, namespace: str, labels: Mapping[str, str], forest: Forest) -> bool:
        """Whether a copy belongs in ``namespace`` (with ``labels``, as after this pass)."""
        if self.none or self.error is not None:
            return False
        if self.labels is not None and not self.labels.matches(labels):
            return False
        lineage = {namespace, *forest.ancestors(namespace)}
        if self.include and not lineage.intersection(self.include):
            return False
        return not lineage.intersection(self.exclude)

    def describe(self) -> str:
        """The exceptions in one line, for ``ns describe``."""
        if self.error is not None:
            return f"blocked: {self.error}"
        if self.none:
            return "copied nowhere (propagate-none)"
        parts = []
        if self.labels is not None:
            parts.append("into namespaces matching its propagate-select")
        if self.include:
            parts.append(f"only into the subtrees of {', '.join(self.include)}")
        if self.exclude:
            parts.append(f"not into the subtrees of {', '.join(self.exclude)}")
        return "; ".join(parts)


EVERYWHERE = Selection()


def selection_of(source: Mapping[str, Any]) -> Selection:
    """Read a source's exception annotations; a bad one yields a Selection with ``error``."""
    annotations = annotations_of(source)
    none = annotations.get(ANNOTATION_PROPAGATE_NONE)
    selector = annotations.get(ANNOTATION_PROPAGATE_SELECT)
    tree = annotations.get(ANNOTATION_PROPAGATE_TREE_SELECT)
    if none is None and selector is None and tree is None:
        return EVERYWHERE
    if none is not None and none not in ("true", "false"):
        return _blocked(ANNOTATION_PROPAGATE_NONE, f'must be "true" or "false", not {none!r}')
    try:
        labels = None if selector is None else parse_selector(selector)
    except SelectorError as error:
        return _blocked(ANNOTATION_PROPAGATE_SELECT, str(error))
    try:
        include, exclude = _tree_terms(tree or "")
    except SelectorError as error:
        return _blocked(ANNOTATION_PROPAGATE_TREE_SELECT, str(error))
    return Selection(none == "true", labels, include, exclude)


def _blocked(annotation: str, reason: str) -> Selection:
    return Selection(error=f"annotation {annotation} cannot be parsed: {reason}")


def _tree_terms(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``a, !b`` into the names to copy into and the names to keep out of."""
    include: list[str] = []
    exclude: list[str] = []
    if not text.strip():
        return (), ()
    for term in (part.strip() for part in text.split(",")):
        name = term[1:].strip() if term.startswith("!") else term
        errors = validate_dns1123_label(name, "name")
        if errors:
            detail = errors[0].detail
            raise SelectorError(f"{term!r} is not a namespace name (or !name): {detail}")
        (exclude if term.startswith("!") else include).append(name)
    return tuple(include), tuple(exclude)
