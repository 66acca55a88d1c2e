"""The changes a plan asks for: one small immutable value per write the controller may make.

Actions carry everything the applier needs (including the preconditions that keep a stale plan
from harming objects changed since the snapshot) and nothing it must compute, except the
clock: condition transition times are left to the applier. Each says which namespace it
targets, so that a failure can be pinned on a namespace, and describes itself in one line for
``--dry-run`` output and logs. The objects they hold are shared with the plan: read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from libaccurate.cloning import copied_from
from libaccurate.constants import FINALIZER
from libaccurate.ownership import OwnedKeys


@dataclass(frozen=True)
class ObjectRef:
    """Which object an action or event is about; ``uid`` pins one incarnation of the name."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        metadata = obj.get("metadata") or {}
        return cls(
            api_version=obj.get("apiVersion", ""),
            kind=obj.get("kind", ""),
            namespace=metadata.get("namespace", ""),
            name=metadata.get("name", ""),
            uid=metadata.get("uid"),
        )

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Identity of the name, whatever the incarnation."""
        return (self.api_version, self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Condition:
    """A SubNamespace condition without its transition time (the applier keeps or sets it)."""

    type: str
    status: Literal["True", "False"]
    reason: str
    message: str


@dataclass(frozen=True)
class SubNamespaceStatus:
    """The status the controller owns: ``conditions`` lists every condition type it sets."""

    observed_generation: int
    conditions: tuple[Condition, ...]

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True)
class CreateNamespace:
    """Create the namespace with this metadata in one server-side apply as the field manager.

    The apply makes the controller the owner of its keys, so later removals work; it carries
    a precondition that an existing namespace of that name (someone else's) cannot meet, so
    such a namespace is never touched: the request fails instead.
    """

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    @property
    def namespace(self) -> str:
        return self.name

    def describe(self) -> str:
        return f"create namespace {self.name}"


@dataclass(frozen=True)
class ApplyNamespaceMetadata:
    """Server-side apply, with force, of exactly these controller-owned labels and annotations.

    Keys the controller applied before and omits here are removed by the server; keys others
    own are left alone. With ``takeover``, those keys are first moved from the Go controller's
    old update entries into the controller's apply entry (one write of ``managedFields``, at
    the version the plan was made from, nothing else changed), so the apply can remove them.
    """

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    takeover: OwnedKeys | None = None

    @property
    def namespace(self) -> str:
        return self.name

    def describe(self) -> str:
        keys = ", ".join(sorted([*self.labels, *self.annotations])) or "none"
        text = f"apply inherited metadata of namespace {self.name} (keys: {keys})"
        if self.takeover:
            text += (
                f", first taking over {self.takeover.describe()} from the Go controller's "
                "update entries"
            )
        return text


@dataclass(frozen=True)
class DeleteNamespace:
    """Delete a namespace the controller made, only if it is still that incarnation (uid)."""

    name: str
    uid: str | None

    @property
    def namespace(self) -> str:
        return self.name

    def describe(self) -> str:
        return f"delete namespace {self.name}"


@dataclass(frozen=True)
class AddFinalizer:
    """Add the Accurate finalizer to a SubNamespace (update at ``resource_version``)."""

    namespace: str
    name: str
    resource_version: str | None

    def describe(self) -> str:
        return f"add finalizer {FINALIZER} to SubNamespace {self.namespace}/{self.name}"


@dataclass(frozen=True)
class RemoveFinalizer:
    """Remove the Accurate finalizer from a SubNamespace (update at ``resource_version``)."""

    namespace: str
    name: str
    resource_version: str | None

    def describe(self) -> str:
        return f"remove finalizer {FINALIZER} from SubNamespace {self.namespace}/{self.name}"


@dataclass(frozen=True)
class PatchSubNamespaceStatus:
    """Set the status the controller owns; condition types it owns but omits are removed."""

    namespace: str
    name: str
    status: SubNamespaceStatus

    def describe(self) -> str:
        parts = ", ".join(f"{c.type}={c.status} ({c.reason})" for c in self.status.conditions)
        return f"set status of SubNamespace {self.namespace}/{self.name}: {parts}"


@dataclass(frozen=True)
class CreateObject:
    """Create a copy; a 'namespace is terminating' refusal is not a failure.

    ``origin`` is the object at the top of the chain of copies (the source a person made),
    on which the pass reports the copies it made.
    """

    object: Mapping[str, Any] = field(repr=False)
    origin: ObjectRef | None = None

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef.of(self.object)

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    def describe(self) -> str:
        return f"create {self.ref} as a copy from {copied_from(self.object)}"


@dataclass(frozen=True)
class ReplaceObject:
    """PUT the copy over the object at ``resource_version``.

    When the server refuses the update because a field is immutable (a RoleBinding's
    ``roleRef``, an immutable Secret), the applier deletes the object (at ``uid``, so that a
    newer object of the same name is never hit) and creates the copy: in update mode the parent
    wins, also over a user's own object of that name.
    """

    object: Mapping[str, Any] = field(repr=False)
    uid: str | None
    resource_version: str | None

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef.of(self.object)

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    def describe(self) -> str:
        return f"replace {self.ref} with a copy from {copied_from(self.object)}"


@dataclass(frozen=True)
class DeleteObject:
    """Delete a copy, with uid and resourceVersion preconditions.

    The preconditions make sure an object re-created or edited since the snapshot (perhaps
    by a user, perhaps no longer a copy) is never deleted by a stale plan. ``origin`` names
    the object the chain of copies came from (perhaps gone), on which the pass reports them.
    """

    ref: ObjectRef
    resource_version: str | None
    origin: ObjectRef | None = None

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    def describe(self) -> str:
        return f"delete {self.ref}"


@dataclass(frozen=True)
class AnnotateObject:
    """Merge-patch annotations onto an object (propagate-generated marks its verdict)."""

    ref: ObjectRef
    annotations: Mapping[str, str]

    @property
    def namespace(self) -> str:
        return self.ref.namespace

    def describe(self) -> str:
        pairs = ", ".join(f"{k}={v}" for k, v in sorted(self.annotations.items()))
        return f"annotate {self.ref}: {pairs}"


@dataclass(frozen=True)
class EmitEvent:
    """Record a Kubernetes Event on ``involved``; it changes nothing the planner reads."""

    involved: ObjectRef
    type: Literal["Normal", "Warning"]
    reason: str
    message: str

    @property
    def namespace(self) -> str:
        return self.involved.namespace

    def describe(self) -> str:
        return f"event {self.type} {self.reason} on {self.involved}: {self.message}"


Action: TypeAlias = (
    CreateNamespace
    | ApplyNamespaceMetadata
    | DeleteNamespace
    | AddFinalizer
    | RemoveFinalizer
    | PatchSubNamespaceStatus
    | CreateObject
    | ReplaceObject
    | DeleteObject
    | AnnotateObject
    | EmitEvent
)
