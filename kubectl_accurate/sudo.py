"""``kubectl accurate sudo``: run kubectl as admin of a tree, through a sudo grant.

A sudo grant gives a user no standing rights, only the right to impersonate themselves together
with the tree's sudo group (libaccurate.access). This command works out who "you" are (the API
server's SelfSubjectReview, or the kubeconfig's user where the server has none) and which tree
the namespace is in, then runs kubectl with ``--as`` and ``--as-group``, saying on stderr which
identity it used. A sudoer may have no right to read the namespace as themselves: the tree is
then found with each sudo identity their RBAC lets them take.
"""

from __future__ import annotations

import subprocess

import click

from kubectl_accurate.access import namespace_labels
from kubectl_accurate.flags import connection_options
from kubectl_accurate.main import epilog, root
from kubectl_accurate.output import CliError
from kubectl_accurate.preconnect import USER_AGENT
from kubectl_accurate.reviews import allowed
from libaccurate.access import SUDO_PREFIX, TURN_SUDO_ON, sudo_group
from libaccurate.constants import LABEL_PARENT, LABEL_TYPE, TYPE_ROOT
from libaccurate.network.kube import ApiError, ConnectionOptions, Kube, resource_path

_IMPERSONATION = ("impersonate", "impersonate_groups")
_NOTE = (
    "Give kubectl's generic flags (--context, --kubeconfig, ...) before 'sudo': they then "
    "apply to both the plugin and the kubectl it runs."
)


@root.command(
    "sudo",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=epilog(
        "sudo -n team-a-dev -- get secrets",
        "--context prod sudo -n team-a -- delete pod stuck-0",
        "sudo -n team-a -- accurate access grant team-a sudo carol",
        note=_NOTE,
    ),
)
@click.option(
    "-n",
    "--namespace",
    metavar="NS",
    help="The namespace to act in, whose tree's sudo group is used "
    "(default: the kubeconfig context's namespace).",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="-- KUBECTL_ARGS...")
@click.pass_context
def sudo(ctx: click.Context, namespace: str | None, args: tuple[str, ...]) -> None:
    """Run kubectl as admin of the tree NS is in, with your sudo grant there.

    Runs "kubectl --as=<you> --as-group=accurate:sudo:<root>" with KUBECTL_ARGS, and exits
    with kubectl's exit code. Refused when you are not a sudoer of that tree. KUBECTL_ARGS may
    start with "accurate" to run this plugin as the tree's admin, e.g. to grant sudo.
    """
    options = connection_options(ctx)
    if options.impersonate or options.impersonate_groups:
        raise CliError("sudo sets --as and --as-group itself; run it without them")
    kube = Kube.connect(options, user_agent=USER_AGENT)
    me = whoami(kube)
    target = namespace or kube.credentials.namespace
    tree_root = _sudo_root(kube, me, target)
    group = sudo_group(tree_root)
    click.echo(
        f'sudo: as user "{me}" with group "{group}" ({target} is in tree {tree_root})', err=True
    )
    # kubectl refuses flags before a plugin's name, so for this plugin they go after it.
    plugin = list(args[:1]) if args[:1] == ("accurate",) else []
    command = [
        "kubectl",
        *plugin,
        *_kubectl_flags(options),
        f"--as={me}",
        f"--as-group={group}",
        *(["--namespace", namespace] if namespace else []),
        *args[len(plugin) :],
    ]
    try:
        ran = subprocess.run(command, check=False)
    except FileNotFoundError as error:
        raise CliError("kubectl not found on PATH") from error
    ctx.exit(ran.returncode)


def whoami(kube: Kube) -> str:
    """Your user name as the API server knows it; the kubeconfig's where the server is older
    than SelfSubjectReview (Kubernetes 1.28)."""
    path = resource_path("authentication.k8s.io", "v1", "selfsubjectreviews")
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        review = kube.create(path, body)
    except ApiError as error:
        if error.code not in (404, 405):
            raise
        name = kube.credentials.username or kube.credentials.user_entry
        if not name:
            raise CliError(
                "cannot tell who you are: the API server has no SelfSubjectReview and the "
                "kubeconfig names no user"
            ) from error
        return name
    return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")


def _sudo_root(kube: Kube, me: str, target: str) -> str:
    """The root of ``target``'s tree, once it is known that you may sudo there.

    The sudo grant's copy in ``target`` names you when your rules there (SelfSubjectRulesReview)
    include impersonating a sudo group; whether you may do so cluster-wide, where it counts, is
    the controller's sudo keeper's doing. Both together make you a sudoer; a grant without the
    keeper's rights gets its own answer, since the person cannot see why nothing works.
    """
    try:
        found: str | None = root_of(kube, target)
    except ApiError as error:
        if error.code != 403:
            raise
        found = None
    if found is not None and _may_sudo(kube, me, found):
        return found
    granted = _sudo_roots(kube, target)
    if found is None:
        for candidate in granted:
            if _root_as_sudoer(kube, me, candidate, target) == candidate:
                return candidate
    # A grant that names you without the cluster-wide rights: for target's own root when you
    # may read it, else for a root you may not impersonate the group of (rights that came from
    # the keeper would let you).
    if found is not None:
        waiting = [found] if found in granted else []
    else:
        waiting = [r for r in granted if not _may_sudo(kube, me, r)]
    if waiting:
        raise CliError(_keeper_missing(me, waiting[0], target))
    if found is not None:
        raise CliError(
            f"you ({me}) are not a sudoer of {found}, the root of {target}'s tree; a cluster "
            f"administrator can grant it with 'kubectl accurate access grant {found} sudo {me}', "
            f"a sudoer with 'kubectl accurate sudo -n {found} -- accurate access grant {found} "
            f"sudo {me}'"
        )
    raise CliError(f"you ({me}) are not a sudoer of the tree {target} is in")


def _root_as_sudoer(kube: Kube, me: str, candidate: str, target: str) -> str | None:
    """``target``'s root as read with the sudo identity of ``candidate``'s tree, if it may."""
    as_sudoer = Kube(
        kube.credentials,
        impersonate=me,
        impersonate_groups=(sudo_group(candidate),),
        user_agent=USER_AGENT,
    )
    try:
        return root_of(as_sudoer, target)
    except ApiError:
        return None


def _keeper_missing(me: str, tree_root: str, target: str) -> str:
    return (
        f"you ({me}) are granted sudo in the tree of {tree_root} (the sudo grant in {target} "
        f"names you), but you may not impersonate its group {sudo_group(tree_root)} yet: the "
        "cluster-wide rights that the controller's sudo keeper makes from the grant are "
        "missing. Either sudo is off in this cluster, and a cluster administrator must turn it "
        f"on ({TURN_SUDO_ON}), or the controller has not caught up with the grant yet: try "
        "again in a moment."
    )


def root_of(kube: Kube, name: str) -> str:
    """Follow the parent labels from ``name`` up to the root of its tree."""
    seen: list[str] = []
    current = name
    while current not in seen:
        seen.append(current)
        labels = namespace_labels(kube, current)
        parent = labels.get(LABEL_PARENT)
        if not parent:
            if labels.get(LABEL_TYPE) != TYPE_ROOT:
                raise CliError(f"namespace {name} is not in a tree: no sudo grant applies there")
            return current
        current = parent
    raise CliError(f"the parents of {name} form a cycle: {' -> '.join(seen)}")


def _may_sudo(kube: Kube, me: str, tree_root: str) -> bool:
    asks = (("groups", sudo_group(tree_root)), ("users", me))
    return all(
        allowed(kube, {"verb": "impersonate", "group": "", "resource": resource, "name": name})
        for resource, name in asks
    )


def _sudo_roots(kube: Kube, namespace: str) -> list[str]:
    """The roots whose sudo group your RBAC lets you impersonate (SelfSubjectRulesReview)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    path = resource_path("authorization.k8s.io", "v1", "selfsubjectrulesreviews")
    rules = (kube.create(path, review).get("status") or {}).get("resourceRules") or []
    return sorted(
        {
            name.removeprefix(SUDO_PREFIX)
            for rule in rules
            if "impersonate" in rule.get("verbs", ()) and "groups" in rule.get("resources", ())
            for name in rule.get("resourceNames") or ()
            if name.startswith(SUDO_PREFIX)
        }
    )


def _kubectl_flags(options: ConnectionOptions) -> list[str]:
    """The connection flags given to the plugin, for the kubectl it runs (same names)."""
    flags = []
    for name, value in options._asdict().items():
        if name in _IMPERSONATION or not value:
            continue
        flag = "--" + name.replace("_", "-")
        flags.append(flag if value is True else f"{flag}={value}")
    return flags
