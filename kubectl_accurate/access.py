"""``kubectl accurate access``: grant, revoke, list and check who may do what in a tree.

Which RoleBindings a grant stands for is libaccurate.access's to say. This module reads what
is there, has the API server judge every write before the first one is made (a server-side dry
run, in which Kubernetes' escalation rule refuses a grant of more than the caller holds), then
writes. The tree is found by following SubNamespaces down from the root, which a tenant may read,
rather than by listing every namespace, which a tenant usually may not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from kubectl_accurate.flags import cache_dir, connect, generic_flags
from kubectl_accurate.main import (
    Group,
    accurate_namespace_option,
    command,
    epilog,
    namespace_argument,
    output_option,
    root,
)
from kubectl_accurate.output import CliError, Printer
from kubectl_accurate.reads import namespace_path
from kubectl_accurate.reviews import allowed, judged
from kubectl_accurate.subnamespace_api import NotServed, SubNamespaceApi
from libaccurate import access as model
from libaccurate.access import LEVELS, AccessError, Edit, Subject
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE, TYPE_ROOT
from libaccurate.network.kube import ApiError, Kube, resource_path

Obj = dict[str, Any]
Plan = Callable[[str, str, Sequence[Subject], dict[str, Obj | None]], list[Edit]]
DRY_RUN = {"dryRun": "All"}
ESCALATION = "attempting to grant RBAC permissions not currently held"
_PLURALS = {"RoleBinding": "rolebindings", "ClusterRole": "clusterroles"}


@root.group(
    cls=Group,
    aliases={"ls": "list"},
    epilog=epilog(
        "access grant team-a edit alice group:team-a-devs",
        "access grant team-a sudo bob --dry-run",
        "access list team-a",
        "access check team-a alice",
    ),
)
@generic_flags(shown=False)
def access() -> None:
    """Grant, revoke, list and check access to a namespace tree."""


def _change_arguments(function: Callable[..., Any]) -> Callable[..., Any]:
    """ROOT LEVEL NAMES... and --dry-run, as grant and revoke take them."""
    for decorate in reversed(
        (
            namespace_argument("root_name", "ROOT"),
            click.argument(
                "level", metavar="view|edit|admin|manage|sudo", type=click.Choice(LEVELS)
            ),
            click.argument("names", metavar="USER|group:GROUP...", nargs=-1, required=True),
            click.option(
                "--dry-run",
                is_flag=True,
                help="Print what would be written, once the API server has judged it; "
                "write nothing.",
            ),
        )
    ):
        function = decorate(function)
    return function


@command(
    access,
    "grant",
    "access grant team-a view alice group:auditors",
    "access grant team-a manage carol",
    "access grant team-a sudo bob",
)
@_change_arguments
@accurate_namespace_option
def grant(
    ctx: click.Context,
    root_name: str,
    level: str,
    names: tuple[str, ...],
    dry_run: bool,
    accurate_namespace: str,
) -> None:
    """Give users and groups LEVEL in the tree under ROOT.

    view, edit and admin bind the built-in ClusterRoles; manage binds accurate:manage
    (sub-namespaces and grants, nothing else). sudo gives no standing rights: it lets a user
    act as admin of the tree through "kubectl accurate sudo", once the controller's sudo keeper
    is on (a warning says so when it can be seen to be off). The RoleBinding is made in ROOT
    and propagated to every namespace below it. A grant of more than you hold is refused.
    """
    done = f"granted {level} in {root_name} and below to {_names(names)}"
    kube, existing = _change(ctx, root_name, level, names, dry_run, model.grant, done)
    if level == "sudo":
        # Loaded only here: it brings in libaccurate.config, which --help must not load.
        from kubectl_accurate.sudo_keeper import sudo_off_warning

        earlier = model.subjects_of(existing.get(model.binding_name(level)) or {})
        warning = sudo_off_warning(kube, root_name, earlier, accurate_namespace)
        if warning:
            click.echo(warning, err=True)


@command(access, "revoke", "access revoke team-a view alice", "access revoke team-a sudo bob")
@_change_arguments
def revoke(
    ctx: click.Context, root_name: str, level: str, names: tuple[str, ...], dry_run: bool
) -> None:
    """Take LEVEL in the tree under ROOT away from users and groups.

    The controller then updates or deletes the copies in every namespace below ROOT; a sudo
    grant's impersonation rights go with the last root that names the user.
    """
    done = f"revoked {level} in {root_name} and below from {_names(names)}"
    _change(ctx, root_name, level, names, dry_run, model.revoke, done)


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)


def _change(
    ctx: click.Context,
    root_name: str,
    level: str,
    names: Sequence[str],
    dry_run: bool,
    plan: Plan,
    done: str,
) -> tuple[Kube, dict[str, Obj | None]]:
    """Plan, judge and make the writes; returns the connection and what was there before."""
    try:
        subjects = [model.parse_subject(name) for name in names]
        kube = connect(ctx)
        require_root(kube, root_name)
        existing = _existing(kube, root_name, level, plan)
        edits = plan(root_name, level, subjects, existing)
    except AccessError as error:
        raise CliError(str(error)) from error
    printer = Printer()
    if not edits:
        state = "already includes" if plan is model.grant else "names none of"
        printer.line(f"nothing to do: {level} in {root_name} {state} {_names(names)}")
        return kube, existing
    _judge(kube, root_name, level, edits)
    if dry_run:
        for edit in edits:
            printer.line(f"would {edit.describe()}")
        printer.line(("dry run: nothing was written", "dim"))
        return kube, existing
    for index, edit in enumerate(edits):
        try:
            _send(kube, edit, dry_run=False)
        except ApiError as error:
            written = "; ".join(e.describe() for e in edits[:index])
            raise CliError(error.message + (f"\n  done: {written}" if written else "")) from error
    printer.line(done)
    return kube, existing


def namespace_labels(kube: Kube, name: str) -> dict[str, str]:
    """A namespace's labels; a namespace that is not there is the user's error to read."""
    found = kube.find(namespace_path(name))
    if found is None:
        raise CliError(f"namespace {name} not found")
    return dict(found["metadata"].get("labels") or {})


def require_root(kube: Kube, name: str) -> None:
    """Grants live in the root of a tree; anywhere else they would not reach the whole tree."""
    labels = namespace_labels(kube, name)
    if labels.get(LABEL_TYPE) != TYPE_ROOT or labels.get(LABEL_PARENT):
        raise CliError(
            f"{name} is not a root namespace: access is granted in the root of a tree "
            "(see 'kubectl accurate list')"
        )


def _existing(kube: Kube, root_name: str, level: str, plan: Plan) -> dict[str, Obj | None]:
    """What is there now, by name. A sudo ClusterRole the caller may not read is taken as
    present when granting (a sudoer adding a sudoer) and left alone when revoking."""
    names = [model.binding_name(level), *([model.SUDO_GROUP_BINDING] if level == "sudo" else [])]
    found = {name: kube.find(_path("RoleBinding", name, root_name)) for name in names}
    if level == "sudo":
        name = model.sudo_group(root_name)
        try:
            found[name] = kube.find(_path("ClusterRole", name))
        except ApiError as error:
            if error.code != 403:
                raise
            found[name] = {"metadata": {"name": name}} if plan is model.grant else None
    return found


def _path(kind: str, name: str | None = None, namespace: str | None = None) -> str:
    return resource_path(model.RBAC_GROUP, "v1", _PLURALS[kind], namespace, name)


def _send(kube: Kube, edit: Edit, dry_run: bool) -> Any:
    meta = edit.obj["metadata"]
    namespace = meta.get("namespace")
    query = {"fieldManager": "kubectl-accurate", **(DRY_RUN if dry_run else {})}
    if edit.verb == "create":
        return kube.create(_path(edit.obj["kind"], namespace=namespace), edit.obj, **query)
    path = _path(edit.obj["kind"], meta["name"], namespace)
    if edit.verb == "replace":
        return kube.replace(path, edit.obj, **query)
    # The options go in the body, where kube-apiserver reads them (it then ignores the query).
    options: Obj = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"resourceVersion": meta.get("resourceVersion")},
    }
    if dry_run:
        options["dryRun"] = ["All"]
    return kube.delete(path, options)


def _judge(kube: Kube, root_name: str, level: str, edits: Sequence[Edit]) -> None:
    """Have the API server judge every write before the first is made. A RoleBinding to a
    ClusterRole this same change creates cannot be dry-run (the role is not there yet): for
    it the caller must be allowed what the escalation rule would ask, impersonating the sudo
    group or binding its ClusterRole."""
    created = {e.obj["metadata"]["name"] for e in edits if e.verb == "create"}
    for edit in edits:
        ref = edit.obj.get("roleRef") or {}
        if edit.verb == "create" and ref.get("kind") == "ClusterRole" and ref["name"] in created:
            _confirm_sudo_holder(kube, root_name)
            continue
        try:
            _send(kube, edit, dry_run=True)
        except ApiError as error:
            if error.code == 403 and ESCALATION in error.message:
                raise CliError(
                    f"refused: granting {level} in {root_name} would give more than you hold. "
                    f"The API server says: {error.message}"
                ) from error
            raise CliError(error.message) from error


def _confirm_sudo_holder(kube: Kube, root_name: str) -> None:
    group = model.sudo_group(root_name)
    asks = (
        {"verb": "impersonate", "group": "", "resource": "groups", "name": group},
        {"verb": "bind", "group": model.RBAC_GROUP, "resource": "clusterroles", "name": group},
    )
    if any(allowed(kube, attributes) for attributes in asks):
        return
    raise CliError(
        f"refused: granting sudo in {root_name} would give more than you hold: you may neither "
        f"impersonate group {group} nor bind ClusterRole {group}"
    )


def tree(ctx: click.Context, kube: Kube, top: str) -> list[str]:
    """``top`` and every sub-namespace below it, following the SubNamespaces in each (none
    where the cluster has no SubNamespace API)."""
    api = SubNamespaceApi(kube, cache_dir(ctx))
    found, pending = [], [top]
    while pending:
        name = pending.pop(0)
        found.append(name)
        try:
            items = api.list(name)
        except NotServed:
            items = []
        pending += sorted(item["metadata"]["name"] for item in items)
    return found


@command(access, "list", "access list team-a", "access list team-a -o yaml")
@namespace_argument("root_name", "ROOT")
@output_option
def list_access(ctx: click.Context, root_name: str, output: str | None) -> None:
    """List the grants in the tree under ROOT (alias: ls): each person's level in each
    namespace, and whether it is the root's grant or a copy of it."""
    kube = connect(ctx)
    require_root(kube, root_name)
    bindings = [
        binding
        for name in tree(ctx, kube, root_name)
        for binding in kube.list_objects(_path("RoleBinding", namespace=name)).get("items") or []
    ]
    rows = model.grant_rows(root_name, bindings)
    printer = Printer()
    if output:
        printer.data([row.to_data() for row in rows], output)
    elif not rows:
        printer.line(f"no grants in {root_name}")
    else:
        cells = [[r.namespace, r.level, str(r.subject), r.source] for r in rows]
        printer.table(["NAMESPACE", "LEVEL", "SUBJECT", "FROM"], cells)


@command(access, "check", "access check team-a alice", "access check team-a bob --group devs")
@namespace_argument("root_name", "ROOT")
@click.argument("person", metavar="USER")
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="GROUP",
    help="A group USER is in; repeat for several (a review knows only the groups it is told).",
)
@output_option
def check(
    ctx: click.Context,
    root_name: str,
    person: str,
    groups: tuple[str, ...],
    output: str | None,
) -> None:
    """What USER may do in each namespace of the tree under ROOT, and why, as RBAC answers it.

    Reading, Secrets, workloads, sub-namespaces and grants are asked in each namespace
    (LocalSubjectAccessReviews, which the tree's admins and managers may create too); sudo,
    a cluster-wide right, only cluster administrators may ask about (SubjectAccessReview).
    """
    kube = connect(ctx)
    require_root(kube, root_name)
    rows = [
        [name, probe.capability, *_answer(kube, probe.review(person, groups, name))]
        for name in tree(ctx, kube, root_name)
        for probe in model.PROBES
    ]
    rows.append(["*", "sudo", *_sudo_answer(kube, model.sudo_review(person, groups, root_name))])
    printer = Printer()
    if output:
        keys = ("namespace", "capability", "allowed", "why")
        answers = {"yes": True, "no": False}
        data = [
            dict(zip(keys, (*row[:2], answers.get(row[2]), row[3]), strict=True)) for row in rows
        ]
        printer.data(data, output)
    else:
        printer.table(["NAMESPACE", "CAPABILITY", "ALLOWED", "WHY"], rows)


def _answer(kube: Kube, review: Obj) -> list[str]:
    status = judged(kube, review)
    return ["yes" if status.get("allowed") else "no", str(status.get("reason") or "")]


def _sudo_answer(kube: Kube, review: Obj) -> list[str]:
    """Sudo is a cluster-wide right: a caller who may not ask is told so, not "no"."""
    try:
        return _answer(kube, review)
    except ApiError as error:
        if error.code != 403:
            raise
        return ["unknown", "only cluster administrators may ask (SubjectAccessReview)"]
