"""Carrying out a command's writes so that a failing command changes nothing.

Before the first write: every write is reviewed with the same admission rules the webhooks
apply (libaccurate.admission), then, when a command has several writes or when the user asked
for a dry run, the API server is asked to judge each write it can judge in advance (a
server-side dry run: authorization, webhooks, validation), so a refusal arrives, word for word,
while nothing has been written. Label patches carry the namespace's resourceVersion, so a
namespace changed since it was read is not patched on a stale picture.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubectl_accurate.changes import (
    Change,
    CreateSubNamespace,
    DeleteSubNamespace,
    LabelPatch,
    Refused,
    Write,
)
from kubectl_accurate.output import CliError, Printer
from kubectl_accurate.reads import namespace_path
from kubectl_accurate.subnamespace_api import SubNamespaceApi
from libaccurate.admission import (
    CREATE,
    UPDATE,
    Verdict,
    review_namespace,
    review_subnamespace,
)
from libaccurate.forest import Forest
from libaccurate.network.kube import ApiError

FIELD_MANAGER = "kubectl-accurate"
DRY_RUN = {"dryRun": "All"}
# Tenant roles (admin, accurate:manage) may not patch namespaces by design: said plainly,
# since a manager would otherwise expect to move sub-namespaces (docs/tenant-access.md).
LABELS_NEED_ADMIN = (
    "only a cluster administrator may change the labels of namespace {name}, and this command "
    "must (moving, grafting and cutting sub-namespaces re-label them): tenant roles, admin and "
    "accurate:manage included, may not change namespaces, because namespace labels also carry "
    "security settings such as Pod Security levels (see docs/tenant-access.md). Ask a cluster "
    "administrator to run it. The API server says: {server}"
)


def review(writes: Sequence[Write], forests: Sequence[Forest]) -> None:
    """Refuse what the webhooks would refuse, judged on the cluster as it is now, as far as the
    user may read it: a write is refused only when every one of a view's ``rules_forests``
    refuses it.

    SubNamespace deletions are left to the server: whether cascading deletion is allowed is
    a flag of the controller the plugin cannot see.
    """
    for write in writes:
        verdicts = [_verdict(write, forest) for forest in forests]
        denials = [verdict.message for verdict in verdicts if verdict and not verdict.allowed]
        if denials and len(denials) == len(forests):
            raise Refused(denials[0])


def _verdict(write: Write, forest: Forest) -> Verdict | None:
    if isinstance(write, LabelPatch):
        return review_namespace(UPDATE, write.after(), write.before, forest, False)
    if isinstance(write, CreateSubNamespace):
        return review_subnamespace(CREATE, write.object(), None, forest, (), False)
    return None


def send(api: SubNamespaceApi, write: Write, dry_run: bool) -> Any:
    query = {"fieldManager": FIELD_MANAGER, **(DRY_RUN if dry_run else {})}
    if isinstance(write, LabelPatch):
        version = write.before["metadata"].get("resourceVersion")
        body = {"metadata": {"resourceVersion": version, "labels": dict(write.labels)}}
        return api.kube.patch(namespace_path(write.name), body, **query)
    if isinstance(write, CreateSubNamespace):
        return api.create(write.object(), **query)
    return _delete(api, write, dry_run)


def _delete(api: SubNamespaceApi, write: DeleteSubNamespace, dry_run: bool) -> Any:
    """DELETE with the options in the body: kube-apiserver then ignores the query, so a
    ``?dryRun=All`` beside them would delete for real."""
    uid = write.subnamespace["metadata"].get("uid")
    options: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": uid},
    }
    if dry_run:
        options["dryRun"] = ["All"]
    return api.delete(write.namespace, write.name, options)


def preflight(api: SubNamespaceApi, writes: Sequence[Write]) -> None:
    """Ask the API server to judge every write it can judge before any is made."""
    for write in writes:
        if isinstance(write, DeleteSubNamespace) and not write.preflight:
            continue
        try:
            send(api, write, dry_run=True)
        except ApiError as error:
            raise CliError(_explained(error, write)) from error


def carry_out(
    api: SubNamespaceApi,
    change: Change,
    forests: Sequence[Forest],
    printer: Printer,
    dry_run: bool,
    preview: Callable[[], None],
) -> None:
    """Review, preflight, then write (or, for a dry run, say what would be written)."""
    review(change.writes, forests)
    if dry_run or len(change.writes) > 1:
        preflight(api, change.writes)
    if not change.writes:
        printer.line(change.summary)
        return
    if dry_run:
        for write in change.writes:
            printer.line(f"would {write.describe()}")
        preview()
        printer.line(("dry run: nothing was written", "dim"))
        return
    for index, write in enumerate(change.writes):
        try:
            send(api, write, dry_run=False)
        except ApiError as error:
            raise CliError(_partial(error, change.writes, index)) from error
    printer.line(change.summary)


def _explained(error: ApiError, write: Write) -> str:
    if error.conflict and isinstance(write, LabelPatch):
        return f"namespace {write.name} changed while the command ran; run it again"
    if error.code == 403 and isinstance(write, LabelPatch):
        return LABELS_NEED_ADMIN.format(name=write.name, server=error.message)
    return error.message


def _partial(error: ApiError, writes: Sequence[Write], failed: int) -> str:
    """The error, and when earlier writes went through, what is done and what is left."""
    message = _explained(error, writes[failed])
    if failed == 0:
        return message
    done = "; ".join(w.describe() for w in writes[:failed])
    left = "; ".join(w.describe() for w in writes[failed:])
    return f"{message}\n  done: {done}\n  not done: {left}"
