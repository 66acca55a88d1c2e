"""What limits each namespace, as the plugin shows it: the HRQs it holds and those above it,
with used/hard of each over its whole subtree, and the tightest limit it is under.

Built from the HRQ objects a user could read (kubectl_accurate.hrq_reads) and the forest of
their view: the numbers are the HRQs' statuses, the controller's sums over each whole subtree,
so a tenant reads the same numbers as an administrator, even where the subtree holds
namespaces they may not read. ``quota`` draws it per tree, ``ns describe`` for one namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from kubectl_accurate.hrq_reads import HrqReading
from libaccurate import quota
from libaccurate.forest import Forest
from libaccurate.quantity import Quantity

# The conditions worth telling a reader, by type and the status that makes them so.
NOTABLE = {
    quota.CONDITION_EXCEEDED: "True",
    quota.CONDITION_LIMITED_ABOVE: "True",
    quota.CONDITION_COUNTED: "False",
}


class Shown(NamedTuple):
    """One HRQ as the views show it: its limits and what its subtree uses (from its status),
    or, for one the user may not read, only its name (``readable`` False)."""

    namespace: str
    name: str
    hard: Mapping[str, str] = {}
    used: Mapping[str, str] = {}
    scope_selector: Any = None
    notes: tuple[str, ...] = ()
    readable: bool = True

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def used_hard(self) -> str:
        if not self.readable:
            return "(you may not read it)"
        pairs = ", ".join(f"{r}: {self.used.get(r, '?')}/{h}" for r, h in self.hard.items())
        return pairs + (" (scoped)" if self.scope_selector else "")

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"namespace": self.namespace, "name": self.name}
        if not self.readable:
            return {**data, "readable": False}
        data.update(hard=dict(self.hard), used=dict(self.used))
        if self.scope_selector:
            data["scopeSelector"] = self.scope_selector
        return {**data, **({"notes": list(self.notes)} if self.notes else {})}


class Place(NamedTuple):
    """What limits one namespace: the HRQs it holds, those above it, nearest first, and the
    tightest limit per resource (of those the user may read: the others may be tighter)."""

    held: tuple[Shown, ...]
    above: tuple[Shown, ...]
    tightest: Mapping[str, quota.Headroom]

    @property
    def unreadable(self) -> tuple[str, ...]:
        return tuple(s.ref for s in (*self.held, *self.above) if not s.readable)

    def tightest_text(self) -> str:
        parts = [_left(resource, room) for resource, room in self.tightest.items()]
        if self.unreadable:
            parts.append(f"and {', '.join(self.unreadable)}, which you may not read")
        return ", ".join(parts) or "-"

    def tightest_data(self) -> dict[str, Any]:
        return {
            resource: {
                "quota": room.hrq.ref,
                "hard": str(room.hrq.hard[resource]),
                "used": str(room.used),
                "left": str(room.left),
            }
            for resource, room in self.tightest.items()
        }

    def to_data(self) -> dict[str, Any]:
        """The HRQs it holds (those above are the parent's) and the tightest limit."""
        data = {"quotas": [s.to_data() for s in self.held], "tightest": self.tightest_data()}
        return {**data, **({"notReadable": list(self.unreadable)} if self.unreadable else {})}


def _left(resource: str, room: quota.Headroom) -> str:
    if room.left.value < 0:
        return (
            f"{resource}: over by {Quantity(-room.left.value, room.left.format)} ({room.hrq.ref})"
        )
    return f"{resource}: {room.left} left ({room.hrq.ref})"


class Limits:
    """Every HRQ read, and those known to apply but not readable, answering per namespace."""

    def __init__(self, forest: Forest, reading: HrqReading) -> None:
        self.forest = forest
        hrqs, problems = quota.read_hrqs(reading.objects)
        self.used = quota.usage_of(reading.objects)
        shown = {_key(obj): _shown(obj, problems.get(_key(obj))) for obj in reading.objects}
        hidden = {key: Shown(*key, readable=False) for key in reading.hidden}
        self.held: dict[str, list[Shown]] = {}
        for key, found in sorted({**hidden, **shown}.items()):
            self.held.setdefault(key[0], []).append(found)
        self.enforced: dict[str, list[quota.Hrq]] = {}
        for hrq in hrqs:
            self.enforced.setdefault(hrq.namespace, []).append(hrq)

    def holds(self, namespace: str) -> tuple[Shown, ...]:
        """The HRQs in ``namespace``, those the user may not read included."""
        return tuple(self.held.get(namespace, ()))

    def above(self, namespace: str) -> tuple[Shown, ...]:
        """The HRQs above ``namespace`` that limit it, nearest first, then those in
        namespaces above the view (known from their ResourceQuotas)."""
        chain = [s for name in self.forest.ancestors(namespace) for s in self.holds(name)]
        beyond = [s for name, held in self.held.items() if name not in self.forest for s in held]
        return tuple({s.ref: s for s in (*chain, *beyond)}.values())

    def place(self, namespace: str) -> Place:
        chain = (namespace, *self.forest.ancestors(namespace))
        on_chain = [hrq for name in chain for hrq in self.enforced.get(name, ())]
        covering = quota.covering(self.forest, on_chain, namespace)
        tight = quota.tightest((hrq, self.used.get(hrq.key) or {}) for hrq in covering)
        return Place(self.holds(namespace), self.above(namespace), tight)

    def limited(self, top: str) -> bool:
        """Whether an HRQ limits any namespace of ``top``'s subtree."""
        if self.above(top):
            return True
        return any(self.holds(name) for name in self.forest.subtree(top))


def _key(obj: Mapping[str, Any]) -> quota.QuotaKey:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _shown(obj: Mapping[str, Any], problem: str | None) -> Shown:
    """An HRQ object as shown: ``hard`` canonical as the controller enforces it (as written
    when it cannot be read, with the problem as a note), ``used`` as its status says."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    notes = tuple(
        str(c.get("message") or c.get("reason") or c.get("type"))
        for c in status.get("conditions") or ()
        if NOTABLE.get(str(c.get("type"))) == c.get("status")
    )
    if problem is not None:
        hard = {str(r): str(q) for r, q in sorted((spec.get("hard") or {}).items())}
        # The status says the same once the controller has seen it (Counted=False).
        notes = (f"not enforced: {problem}",)
    else:
        hard = {r: str(q) for r, q in quota.hard_items(quota.read_hrq(obj))}
    return Shown(
        *_key(obj),
        hard=hard,
        used={str(r): str(q) for r, q in (status.get("used") or {}).items()},
        scope_selector=spec.get("scopeSelector") or None,
        notes=notes,
    )
