"""The kinds the server serves: a fixed table of built-ins plus those CRDs define at run time.

Everything else (routing, discovery, validation, tables) asks this table what a resource is, so
that a CRD registered by a test behaves like a built-in in every respect the table describes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from accurate_testbed.apiserver import crds
from accurate_testbed.apiserver.conversion import ConversionWebhook

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    """One served resource (group, version, plural) and the behaviour the real server gives it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    has_status: bool = False
    # Whether the real server maintains metadata.generation for this kind.
    has_generation: bool = False
    # Custom resources refuse PUT without resourceVersion; most built-ins accept it.
    unconditional_update: bool = True
    custom: bool = False
    schema: dict[str, Any] | None = None
    printer_columns: tuple[dict[str, Any], ...] = ()
    categories: tuple[str, ...] = ()
    extra_subresources: tuple[str, ...] = field(default=())
    # A custom resource whose CRD is being deleted: served, but new objects are refused.
    terminating: bool = False
    # A custom resource whose CRD converts between versions through a webhook.
    conversion: ConversionWebhook | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def subresources(self) -> tuple[str, ...]:
        return (("status",) if self.has_status else ()) + self.extra_subresources


def _builtin(
    group: str, version: str, plural: str, kind: str, namespaced: bool = True, **extra: Any
) -> Resource:
    return Resource(group, version, plural, kind, namespaced, **extra)


RBAC = "rbac.authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
AUTHORIZATION = "authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
APIEXTENSIONS = "apiextensions.k8s.io"

BUILTINS: tuple[Resource, ...] = (
    _builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        has_status=True,
        extra_subresources=("finalize",),
    ),
    _builtin("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _builtin("", "v1", "pods", "Pod", short_names=("po",), has_status=True, categories=("all",)),
    _builtin("", "v1", "secrets", "Secret"),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _builtin("", "v1", "services", "Service", short_names=("svc",), has_status=True),
    _builtin("", "v1", "events", "Event", short_names=("ev",)),
    _builtin("", "v1", "resourcequotas", "ResourceQuota", short_names=("quota",), has_status=True),
    _builtin(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        short_names=("pvc",),
        has_status=True,
    ),
    _builtin("", "v1", "limitranges", "LimitRange", short_names=("limits",)),
    _builtin("events.k8s.io", "v1", "events", "Event", short_names=("ev",)),
    _builtin(RBAC, "v1", "roles", "Role"),
    _builtin(RBAC, "v1", "rolebindings", "RoleBinding"),
    _builtin(RBAC, "v1", "clusterroles", "ClusterRole", False),
    _builtin(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _builtin(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        short_names=("netpol",),
        has_generation=True,
    ),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease"),
    _builtin(
        "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)
    ),
    _builtin(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        has_status=True,
        has_generation=True,
        categories=("all",),
    ),
    _builtin(
        APIEXTENSIONS,
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        has_status=True,
        has_generation=True,
    ),
    _builtin(
        ADMISSION,
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        has_generation=True,
    ),
    _builtin(
        ADMISSION,
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        has_generation=True,
    ),
    _builtin(
        AUTHENTICATION,
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        False,
        verbs=("create",),
    ),
    _builtin(
        AUTHORIZATION,
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
    _builtin(
        AUTHORIZATION,
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        False,
        verbs=("create",),
    ),
    _builtin(
        AUTHORIZATION, "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)
    ),
    _builtin(
        AUTHORIZATION,
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        verbs=("create",),
    ),
)

# The order kube-apiserver lists its groups in; custom groups follow, sorted.
BUILTIN_GROUP_ORDER = (
    "",
    "events.k8s.io",
    AUTHENTICATION,
    AUTHORIZATION,
    "apps",
    RBAC,
    "networking.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    ADMISSION,
    APIEXTENSIONS,
)


def resources_of_crd(crd: dict[str, Any]) -> list[Resource]:
    """The resources a CRD serves: one per served version, with its schema and columns."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    result = []
    for version in spec.get("versions", []):
        if not version.get("served"):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        result.append(
            Resource(
                group=spec.get("group", ""),
                version=version["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular", ""),
                short_names=tuple(names.get("shortNames") or ()),
                has_status="status" in subresources,
                has_generation=True,
                unconditional_update=False,
                custom=True,
                schema=schema,
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                categories=tuple(names.get("categories") or ()),
                terminating=crds.is_terminating(crd),
                conversion=ConversionWebhook.of_crd(crd),
            )
        )
    return result


class Registry:
    """Looks resources up by (group, version, plural) or by kind; rebuilt when CRDs change."""

    def __init__(self) -> None:
        self._resources: list[Resource] = list(BUILTINS)

    def set_crds(self, crds: Iterable[dict[str, Any]]) -> None:
        custom = [resource for crd in crds for resource in resources_of_crd(crd)]
        self._resources = list(BUILTINS) + custom

    def __iter__(self) -> Iterator[Resource]:
        return iter(list(self._resources))

    def namespaced(self, verb: str) -> Iterator[Resource]:
        """Each namespaced resource that serves ``verb``, once per (group, plural) whatever
        its versions: what kube's controllers go over when they act on a whole namespace."""
        seen: set[tuple[str, str]] = set()
        for resource in list(self._resources):
            kind = (resource.group, resource.plural)
            if resource.namespaced and verb in resource.verbs and kind not in seen:
                seen.add(kind)
                yield resource

    def find(self, group: str, version: str, plural: str) -> Resource | None:
        for resource in self._resources:
            if (resource.group, resource.version, resource.plural) == (group, version, plural):
                return resource
        return None

    def by_kind(self, api_version: str, kind: str) -> Resource | None:
        for resource in self._resources:
            if resource.api_version == api_version and resource.kind == kind:
                return resource
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per group, in kube-apiserver's group order."""
        groups: dict[str, list[str]] = {}
        order = {group: index for index, group in enumerate(BUILTIN_GROUP_ORDER)}
        ordered = sorted(self._resources, key=lambda r: (order.get(r.group, len(order)), r.group))
        for resource in ordered:
            versions = groups.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return groups

    def in_group_version(self, group: str, version: str) -> list[Resource]:
        return [r for r in self._resources if (r.group, r.version) == (group, version)]
