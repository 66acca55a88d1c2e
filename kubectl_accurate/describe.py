"""``ns describe``: a namespace's place in the forest, the objects propagated into or out of it,
and the controller's latest Events about it.

The Go plugin stops when the controller's config is unreadable and when one kind cannot be
listed; here a tenant still gets everything they may see: the watched kinds come from
``watched`` (which says where it found them), and kinds the user may not list are named as
skipped instead of failing the whole command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubectl_accurate import hrq_reads
from kubectl_accurate.arguments import NO_TYPE
from kubectl_accurate.namespaces import Namespaces
from kubectl_accurate.output import CliError, Printer, shorten
from kubectl_accurate.quota_limits import Limits, Place
from kubectl_accurate.subnamespace_api import SubNamespaceApi
from kubectl_accurate.watched import Watched
from libaccurate import quota
from libaccurate.cloning import copied_from, propagate_mode
from libaccurate.closing import NEEDS_A_PERSON
from libaccurate.constants import (
    CONDITION_READY,
    EVENT_COMPONENT,
    SUBNAMESPACE_KIND,
    TYPE_ROOT,
    TYPE_TEMPLATE,
)
from libaccurate.network.kube import ApiError, Kube, KubeError, resource_path
from libaccurate.selection import EVERYWHERE, selection_of
from libaccurate.treelabels import is_tree_label, tree_label_suffix, tree_labels


@dataclass(frozen=True)
class Row:
    kind: str
    api_version: str
    name: str
    from_: str
    mode: str
    exceptions: str = ""
    error: str | None = None


# The controller tells of a pass in a handful of Events; the latest few say what it last did.
EVENTS_SHOWN = 10


@dataclass(frozen=True)
class EventRow:
    """One of the controller's Events: when it was last seen, and what it says about what."""

    last_seen: str
    type: str
    reason: str
    object: str
    message: str
    count: int


@dataclass(frozen=True)
class Description:
    name: str
    type: str
    parent: str | None
    template: str | None
    children: tuple[str, ...]
    instances: tuple[str, ...]
    problem: str | None
    watched: Watched
    rows: tuple[Row, ...]
    skipped: tuple[tuple[str, str], ...]
    events: tuple[EventRow, ...] = ()
    tree_labels: tuple[tuple[str, str], ...] = ()
    label_problems: tuple[str, ...] = ()
    stuck: tuple[str, ...] = ()
    # The hierarchical quotas that limit it; None on a cluster without them.
    quotas: Place | None = None

    @property
    def problems(self) -> tuple[str, ...]:
        """Every problem the controller sees on this namespace, with its reason."""
        bad = tuple(f"{r.kind} {r.name}: {r.error}" for r in self.rows if r.error is not None)
        chain = (self.problem,) if self.problem else ()
        return (*chain, *self.label_problems, *bad, *self.stuck)

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "parent": self.parent,
            "template": self.template,
            "children": list(self.children),
            "instances": list(self.instances),
            "problem": self.problem,
            # Left out when empty, so that output of clusters without them stays as it was.
            **({"problems": list(self.problems)} if self.problems else {}),
            **({"treeLabels": dict(self.tree_labels)} if self.tree_labels else {}),
            "watchedKinds": {
                "source": self.watched.source,
                "fromConfig": self.watched.from_config,
                "kinds": [_kind_id(r.gvk.kind, r.gvk.api_version) for r in self.watched.resources],
            },
            "resources": [
                {
                    "kind": row.kind,
                    "apiVersion": row.api_version,
                    "name": row.name,
                    "from": row.from_,
                    "mode": row.mode,
                    **({"exceptions": row.exceptions} if row.exceptions else {}),
                }
                for row in self.rows
            ],
            "skipped": [{"resource": kind, "reason": reason} for kind, reason in self.skipped],
            "events": [
                {
                    "lastSeen": event.last_seen,
                    "type": event.type,
                    "reason": event.reason,
                    "object": event.object,
                    "message": event.message,
                    "count": event.count,
                }
                for event in self.events
            ],
            **({"hierarchicalQuotas": _quota_data(self.quotas)} if self.quotas else {}),
        }


def _quota_data(place: Place) -> dict[str, Any]:
    """Each HRQ that limits the namespace, its own first, with used/hard of its whole
    subtree, and the tightest limit."""
    data = {
        "quotas": [s.to_data() for s in (*place.held, *place.above)],
        "tightest": place.tightest_data(),
    }
    return {**data, **({"notReadable": list(place.unreadable)} if place.unreadable else {})}


def describe(
    kube: Kube,
    namespaces: Namespaces,
    name: str,
    watched: Watched,
    api: SubNamespaceApi | None = None,
) -> Description:
    namespace = namespaces.get(name)
    if namespace is None:
        raise CliError(f"namespace {name} not found")
    forest = namespaces.forest
    node = forest.nodes[name]
    rows: list[Row] = []
    skipped: list[tuple[str, str]] = []
    for resource in watched.resources:
        gvk = resource.gvk
        path = resource_path(gvk.group, gvk.version, resource.plural, name)
        try:
            items = kube.list_objects(path).get("items") or []
        except ApiError as error:
            skipped.append((resource.plural, error.message))
            continue
        rows.extend(_row(gvk.kind, gvk.api_version, item) for item in items if _propagated(item))
    events = _events(kube, name, node.parent, skipped)
    problem = forest.problem(name)
    suffix = tree_label_suffix(name, node.labels)
    return Description(
        name=name,
        type=node.type if node.type else NO_TYPE,
        parent=node.parent,
        template=node.template,
        children=forest.children(name),
        instances=forest.instances(name),
        problem=problem.message if problem else None,
        watched=watched,
        rows=tuple(sorted(rows, key=lambda r: (r.kind, r.name))),
        skipped=tuple(skipped),
        events=events,
        tree_labels=tuple(
            sorted(
                ((k, v) for k, v in node.labels.items() if suffix and is_tree_label(k, suffix)),
                key=lambda item: (-int(item[1]) if item[1].isdigit() else 0, item[0]),
            )
        ),
        label_problems=tree_labels(forest, node, suffix).problems if suffix else (),
        stuck=_stuck(api, name, node.parent, skipped) if api else (),
        quotas=_quotas(kube, namespaces, name, skipped),
    )


def _quotas(
    kube: Kube, namespaces: Namespaces, name: str, skipped: list[tuple[str, str]]
) -> Place | None:
    """The HRQs of the namespace and of those above it, read one LIST per namespace of the
    chain; in a partial view, also those above it the user may not read, named by the
    ResourceQuotas kept for them in the namespace (kubectl_accurate.hrq_reads)."""
    forest = namespaces.forest
    chain = [n for n in (name, *forest.ancestors(name)) if n in forest]
    try:
        reading = hrq_reads.read_in(kube, chain)
    except hrq_reads.NotInstalled:
        return None
    if not namespaces.complete:
        reading = hrq_reads.with_hidden(kube, reading, [name])
    skipped.extend((f"{quota.PLURAL} in {n}", why) for n, why in reading.refused.items())
    return Limits(forest, reading).place(name)


def _stuck(
    api: SubNamespaceApi, name: str, parent: str | None, skipped: list[tuple[str, str]]
) -> tuple[str, ...]:
    """What the controller reports as needing a person (a conflict, a broken chain) on the
    SubNamespace of this namespace and on those in it, from their Ready conditions."""
    found: list[Mapping[str, Any]] = []
    try:
        if parent is not None:
            own = api.get(parent, name)
            found.extend([own] if own else [])
        found.extend(api.list(name))
    except KubeError as error:
        skipped.append(("subnamespaces", str(error)))
    lines = []
    for sub in found:
        meta = sub.get("metadata") or {}
        for condition in (sub.get("status") or {}).get("conditions") or ():
            if (
                condition.get("type") == CONDITION_READY
                and condition.get("reason") in NEEDS_A_PERSON
            ):
                where = f"SubNamespace {meta.get('namespace')}/{meta.get('name')}"
                lines.append(f"{where}: {condition['reason']}: {condition.get('message', '')}")
    return tuple(lines)


def _events(
    kube: Kube, name: str, parent: str | None, skipped: list[tuple[str, str]]
) -> tuple[EventRow, ...]:
    """The controller's latest Events in the namespace (about its sources and copies) and on
    its SubNamespace (in the parent namespace), oldest first as ``kubectl describe`` lists
    them; where the user may not list Events, that is noted as skipped."""
    wanted = f"source={EVENT_COMPONENT}"
    queries = [(name, wanted)]
    if parent is not None:
        on_subnamespace = f"involvedObject.kind={SUBNAMESPACE_KIND},involvedObject.name={name}"
        queries.append((parent, f"{wanted},{on_subnamespace}"))
    found: list[Mapping[str, Any]] = []
    for namespace, selector in queries:
        path = resource_path("", "v1", "events", namespace)
        try:
            found.extend(kube.list_objects(path, fieldSelector=selector).get("items") or [])
        except ApiError as error:
            skipped.append((f"events in {namespace}", error.message))
    rows = sorted((_event_row(event) for event in found), key=lambda e: e.last_seen)
    return tuple(rows[-EVENTS_SHOWN:])


def _event_row(event: Mapping[str, Any]) -> EventRow:
    involved = event.get("involvedObject") or {}
    seen = event.get("lastTimestamp") or event.get("eventTime") or ""
    return EventRow(
        last_seen=str(seen),
        type=str(event.get("type") or ""),
        reason=str(event.get("reason") or ""),
        object=f"{involved.get('kind', '')}/{involved.get('name', '')}",
        message=str(event.get("message") or ""),
        count=int(event.get("count") or 1),
    )


def _propagated(obj: Mapping[str, Any]) -> bool:
    return bool(copied_from(obj) or propagate_mode(obj))


def _row(kind: str, api_version: str, obj: Mapping[str, Any]) -> Row:
    """A propagated object; the exceptions shown are a source's own (a copy carries its
    source's annotations, which the controller reads on the source only)."""
    selection = EVERYWHERE if copied_from(obj) else selection_of(obj)
    return Row(
        kind,
        api_version,
        obj["metadata"]["name"],
        copied_from(obj) or "",
        propagate_mode(obj) or "",
        selection.describe() if selection.narrowed else "",
        selection.error,
    )


def _kind_id(kind: str, api_version: str) -> str:
    """``Role.rbac.authorization.k8s.io/v1``, ``Secret/v1``: kind and API version at a glance."""
    group, _, version = api_version.rpartition("/")
    return f"{kind}.{group}/{version}" if group else f"{kind}/{version}"


def show(printer: Printer, description: Description) -> None:
    """kubectl-describe style: aligned fields, then the table of propagated objects."""
    fields: list[tuple[str, str]] = [("Name", description.name), ("Type", description.type)]
    if description.parent:
        fields.append(("Parent", description.parent))
    if description.template:
        fields.append(("Template", description.template))
    if description.children or description.parent or description.type == TYPE_ROOT:
        fields.append(("Children", _count(description.children)))
    if description.instances or description.type == TYPE_TEMPLATE:
        fields.append(("Instances", _count(description.instances)))
    if description.tree_labels:
        labels = ", ".join(f"{key}={value}" for key, value in description.tree_labels)
        fields.append(("Tree labels", labels))
    fields.extend(("Problem", problem) for problem in description.problems)
    fields.append(("Watched kinds", description.watched.source))
    width = max(len(label) for label, _ in fields) + 2
    for label, value in fields:
        printer.line((f"{label}:".ljust(width), "bold"), value)
    printer.line("")
    if not description.rows:
        printer.line(("Resources:", "bold"), " none propagated into or from this namespace")
    else:
        printer.line(("Resources:", "bold"))
        exceptions = any(r.exceptions for r in description.rows)
        table = [_resource_line(r, exceptions) for r in description.rows]
        header = ("KIND", "NAME", "FROM", "MODE", *(("EXCEPTIONS",) if exceptions else ()))
        printer.table(header, table, indent="  ")
    if description.quotas is not None:
        _show_quotas(printer, description.quotas)
    _show_events(printer, description.events)
    for resource, reason in description.skipped:
        printer.line(("Skipped:", "yellow"), f" {resource}: {reason}")


def _resource_line(row: Row, exceptions: bool) -> tuple[str, ...]:
    line = (row.kind, row.name, row.from_ or "-", row.mode or "-")
    return (*line, row.exceptions or "-") if exceptions else line


def _show_quotas(printer: Printer, place: Place) -> None:
    """The HRQs that limit the namespace, with used/hard of each one's whole subtree."""
    printer.line("")
    limiting = (*place.held, *place.above)
    if not limiting:
        printer.line(("Hierarchical quotas:", "bold"), " none limit this namespace")
        return
    printer.line(("Hierarchical quotas:", "bold"), " used/hard of each one's whole subtree")
    printer.table(("QUOTA", "USED/HARD"), [(s.ref, s.used_hard()) for s in limiting], "  ")
    printer.line("  ", ("Tightest:", "bold"), f" {place.tightest_text()}")
    for shown in limiting:
        for note in shown.notes:
            printer.line(f"  {shown.ref}: {note}")


def _show_events(printer: Printer, events: tuple[EventRow, ...]) -> None:
    printer.line("")
    if not events:
        printer.line(("Events:", "bold"), " none from the controller")
        return
    printer.line(("Events:", "bold"))
    rows = [(e.last_seen, e.type, e.reason, e.object, _counted(e.message, e.count)) for e in events]
    printer.table(("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"), rows, indent="  ")


def _counted(message: str, count: int) -> str:
    return f"{message} (x{count})" if count > 1 else message


def _count(names: tuple[str, ...]) -> str:
    return f"{len(names)} ({shorten(names)})" if names else "0"
