"""The names Accurate puts on the wire, shared byte for byte with the Go Accurate.

Changing any value here breaks compatibility with clusters run by the Go controller.
"""

from typing import Final

DOMAIN: Final = "accurate.cybozu.com"
RESERVED_PREFIX: Final = "accurate.cybozu.com/"

LABEL_TYPE: Final = "accurate.cybozu.com/type"
LABEL_PARENT: Final = "accurate.cybozu.com/parent"
LABEL_TEMPLATE: Final = "accurate.cybozu.com/template"
LABEL_CREATED_BY: Final = "app.kubernetes.io/created-by"
CREATED_BY_VALUE: Final = "accurate"

TYPE_ROOT: Final = "root"
TYPE_TEMPLATE: Final = "template"

ANNOTATION_PROPAGATE: Final = "accurate.cybozu.com/propagate"
ANNOTATION_FROM: Final = "accurate.cybozu.com/from"
ANNOTATION_PROPAGATE_GENERATED: Final = "accurate.cybozu.com/propagate-generated"
ANNOTATION_GENERATED: Final = "accurate.cybozu.com/generated"
# Ours, not the Go Accurate's: a hash of the clone last written to a copy, so that a change of
# the source (including a removed field) can be told from defaults the API server filled in.
ANNOTATION_SOURCE_HASH: Final = "accurate.cybozu.com/source-hash"

PROPAGATE_CREATE: Final = "create"
PROPAGATE_UPDATE: Final = "update"
PROPAGATE_MODES: Final = (PROPAGATE_CREATE, PROPAGATE_UPDATE)

FINALIZER: Final = "accurate.cybozu.com/finalizer"
FIELD_MANAGER: Final = "accurate-controller"

GROUP: Final = "accurate.cybozu.com"
SUBNAMESPACE_KIND: Final = "SubNamespace"
SUBNAMESPACE_PLURAL: Final = "subnamespaces"
SUBNAMESPACE_CRD_NAME: Final = "subnamespaces.accurate.cybozu.com"
STORAGE_VERSION: Final = "v2"
LEGACY_VERSIONS: Final = ("v1", "v2alpha1")

CONDITION_STALLED: Final = "Stalled"
CONDITION_READY: Final = "Ready"
REASON_CONFLICT: Final = "Conflict"

# SubNamespace v1 kept what v2 has in status in these annotations.
ANNOTATION_V1_OBSERVED_GENERATION: Final = "internal.accurate.cybozu.com/observed-generation"
ANNOTATION_V1_CONDITIONS: Final = "internal.accurate.cybozu.com/conditions"
V1_STATUS_OK: Final = "ok"
V1_STATUS_CONFLICT: Final = "conflict"

FEATURE_DISABLE_PROPAGATE_GENERATED: Final = "DisablePropagateGenerated"

# What the controller's Events name as their source, and what the plugin looks them up by.
EVENT_COMPONENT: Final = "accurate-controller"

# Ours, not the Go Accurate's: per-object propagation exceptions on a source (issue 14).
ANNOTATION_PROPAGATE_SELECT: Final = "accurate.cybozu.com/propagate-select"
ANNOTATION_PROPAGATE_TREE_SELECT: Final = "accurate.cybozu.com/propagate-tree-select"
ANNOTATION_PROPAGATE_NONE: Final = "accurate.cybozu.com/propagate-none"
# Ours: on a SubNamespace, lets deleting it delete its whole subtree, leaves first (issue 14).
ANNOTATION_ALLOW_CASCADING_DELETION: Final = "accurate.cybozu.com/allow-cascading-deletion"

# HNC's API group. HNC never copies a label or annotation whose prefix ends with it
# (``hnc.x-k8s.io/...``, ``propagate.hnc.x-k8s.io/...``): they speak of the source alone.
HNC_GROUP: Final = "hnc.x-k8s.io"
