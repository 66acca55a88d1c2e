"""The plugin for the tenant it exists for (issue 12): a user whose only right is a RoleBinding
to the built-in ``admin`` ClusterRole in their root, annotated to be copied down, which a running
controller copies into their sub-namespaces. They hold nothing cluster-scoped: no LIST of
namespaces, nothing of the controller's. The SubNamespace roles we ship are aggregated into
``admin``, so they may create, read and delete SubNamespaces in their tree.

Each case runs the real ``kubectl accurate`` as that user, through the API server's RBAC:
impersonated with ``--as`` from the admin kubeconfig (which works the same on a real cluster),
and once with the tenant's own token and kubeconfig (in-memory server only).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from accurate_testbed.apiserver.server import ApiServer
from kubectl_accurate.reads import CHILDREN_NOTE, LIMITED_NOTE, TREE_NOTE
from libaccurate import subnamespaces
from libaccurate.config import NamingPolicy
from libaccurate.constants import (
    ANNOTATION_FROM,
    LABEL_PARENT,
    LABEL_TEMPLATE,
    LABEL_TYPE,
    PROPAGATE_UPDATE,
    TYPE_TEMPLATE,
)
from libaccurate.network.kube import resource_path
from tests.e2e.cli import (
    TENANT_GRANT,
    failed,
    field,
    install_subnamespace_roles,
    plugin_env,
    resource_rows,
    run_plugin,
    succeeded,
    tenant_grant,
)
from tests.e2e.controller import Controllers, Scene
from tests.e2e.webhooks import Webhooks

RBAC = "rbac.authorization.k8s.io"
CONFIG = {"watches": [{"group": RBAC, "version": "v1", "kind": "RoleBinding"}]}
GRANT = TENANT_GRANT
NOTE = LIMITED_NOTE + "\n"
LEGEND = "[r] root  [s] sub-namespace made by a SubNamespace"
# What each reading command's partial view says it leaves out.
TREES, CHILDREN = TREE_NOTE + "\n", CHILDREN_NOTE + "\n"


@dataclass
class Tenant:
    scene: Scene
    user: str
    root: str
    child: str

    def run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """``kubectl accurate ARGS --as USER`` with the admin's kubeconfig."""
        return run_plugin(*args, "--as", self.user, kubeconfig=self.scene.cluster.kubeconfig)

    def versions(self) -> dict[str, str]:
        """The resourceVersion of the tenant's namespaces and SubNamespaces: equal before and
        after means nothing was written."""
        found = {}
        for name in (self.root, self.child):
            path = resource_path("", "v1", "namespaces", name=name)
            found[name] = self.scene.kube.get(path)["metadata"]["resourceVersion"]
            for sub in self.scene.kube.list_objects(subnamespaces.path(name))["items"]:
                found[f"{name}/{sub['metadata']['name']}"] = sub["metadata"]["resourceVersion"]
        return found


def _copied(scene: Scene, namespace: str) -> bool:
    path = resource_path(RBAC, "v1", "rolebindings", namespace, GRANT)
    found = scene.get(path) or {}
    return bool((found.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_FROM))


@pytest.fixture
def tenant(
    controllers: Controllers, scene: Scene, start_webhooks: Callable[..., Webhooks]
) -> Tenant:
    """Root and child, the tenant's RoleBinding to ``admin`` in the root, copied to the child
    by the controller; the webhooks allow only names starting ``ok-`` under this root."""
    install_subnamespace_roles(scene.cluster, scene.kube)
    user = scene.name("alice")
    root = scene.root("team")
    start_webhooks(naming_policies=[NamingPolicy(root=f"^{root}$", match="^ok-")])
    controllers.start(CONFIG)
    scene.apply(tenant_grant(root, user))
    child = scene.subnamespace(root, "ok-web")
    scene.settle(root, child)
    scene.wait(lambda: _copied(scene, child), "the tenant's RoleBinding copied to the child")
    tenant = Tenant(scene, user, root, child)
    # Listing the root's SubNamespaces needs the roles aggregated into admin, which a real
    # cluster's controller-manager does in its own time.
    drawn = f"{root}\n└── {child}\n"
    scene.wait(
        lambda: tenant.run("list", root, "--no-markers").stdout == drawn,
        "the tenant's rights to apply",
    )
    return tenant


def limited(result: subprocess.CompletedProcess[str], note: str = TREES) -> str:
    """The output of a command that succeeded on the tenant's partial view, saying so once
    (``list`` by default), with what such a view leaves out."""
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    assert result.stderr == note
    return result.stdout


def test_a_tenant_creates_a_sub_namespace_and_sees_it_in_their_tree(tenant: Tenant) -> None:
    scene, root = tenant.scene, tenant.root
    name = scene.name("ok-api")
    preview = succeeded(tenant.run("sub", "create", name, root, "--dry-run")).splitlines()
    assert preview[0] == f"would create SubNamespace {root}/{name}"
    assert f"  create namespace {name}" in preview
    assert preview[-1] == "dry run: nothing was written"
    assert scene.sub(root, name) is None
    assert succeeded(tenant.run("sub", "create", name, root)) == (
        f"created SubNamespace {root}/{name}; the controller will create namespace {name}\n"
    )
    scene.settle(root, name)
    scene.wait(lambda: _copied(scene, name), "the tenant's RoleBinding copied to the new child")
    first, second = sorted((tenant.child, name))
    drawn = f"{root} [r]\n├── {first} [s]\n└── {second} [s]\n\n{LEGEND}\n"
    assert limited(tenant.run("list", root)) == drawn
    assert limited(tenant.run("sub", "list", "-n", root)) == drawn
    data = json.loads(limited(tenant.run("list", root, "-o", "json")))
    assert data == [
        {
            "name": root,
            "children": [{"name": first, "children": []}, {"name": second, "children": []}],
        }
    ]


def test_a_tenant_by_group_with_the_flags_anywhere(tenant: Tenant) -> None:
    """``--as`` and ``--as-group`` (repeatable) before or after the subcommand, as in kubectl."""
    scene, root = tenant.scene, tenant.root
    group, stranger = scene.name("team"), scene.name("bob")
    binding = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "team-admin", "namespace": root},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": group}],
    }
    scene.apply(binding)
    flags = ("--as", stranger, "--as-group", "other", "--as-group", group)
    kubeconfig = scene.cluster.kubeconfig
    scene.wait(
        lambda: run_plugin("ns", "describe", root, *flags, kubeconfig=kubeconfig).returncode == 0,
        "the group's grant",
    )
    name = scene.name("ok-grp")
    created = run_plugin("sub", *flags, "create", name, root, kubeconfig=kubeconfig)
    assert succeeded(created).startswith(f"created SubNamespace {root}/{name}")
    assert scene.sub(root, name) is not None


def test_a_tenant_deletes_a_sub_namespace(tenant: Tenant) -> None:
    scene, root = tenant.scene, tenant.root
    name = scene.subnamespace(root, "ok-tmp")
    scene.settle(root, name)
    scene.wait(lambda: _copied(scene, name), "the tenant's RoleBinding copied to it")
    assert succeeded(tenant.run("sub", "delete", name)) == (
        f"deleted SubNamespace {root}/{name}; the controller will delete namespace {name}\n"
    )
    scene.wait(lambda: scene.sub(root, name) is None, "the SubNamespace to go")


def test_a_tenants_describe_and_list_from_the_current_namespace(tenant: Tenant) -> None:
    root, child = tenant.root, tenant.child
    output = limited(tenant.run("ns", "describe", child), CHILDREN)
    assert field(output, "Parent") == root
    assert field(output, "Watched kinds").startswith("guessed: the usual kinds the server serves")
    assert ["RoleBinding", GRANT, root, PROPAGATE_UPDATE] in resource_rows(output)
    described = json.loads(limited(tenant.run("ns", "describe", root, "-o", "json"), CHILDREN))
    assert (described["type"], described["children"]) == ("root", [child])
    # Drawn from the top of the child's chain: the view reads the SubNamespaces below every
    # namespace on the way up, so the child's origin is known.
    assert limited(tenant.run("list", "-n", child)) == f"{root} [r]\n└── {child} [s]\n\n{LEGEND}\n"


def test_a_tenants_template_list_shows_the_templates_above_them(tenant: Tenant) -> None:
    """Instances cannot be found without listing namespaces; the templates the tenant's
    namespaces use, when readable, are found by walking up."""
    scene, root = tenant.scene, tenant.root
    template = scene.namespace("tmpl", {LABEL_TYPE: TYPE_TEMPLATE})
    scene.apply(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-view", "namespace": template},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": tenant.user}],
        }
    )
    scene.kubectl("label", "namespace", root, f"{LABEL_TEMPLATE}={template}")
    scene.wait(lambda: tenant.run("ns", "describe", template).returncode == 0, "the view grant")
    listed = limited(tenant.run("template", "list", "-n", root), NOTE)
    assert listed == f"{template}\n└── {root}\n"
    assert limited(tenant.run("template", "list", template), NOTE) == f"{template}\n"


def test_a_tenant_who_names_nothing_they_may_read_is_told_how_to(tenant: Tenant) -> None:
    result = tenant.run("list")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == TREES + (
        "error: you may not list namespaces, and there are no roots among those you may read "
        "from the current namespace; name one, or pick a current namespace with -n\n"
    )
    other = tenant.scene.root("other")
    assert failed(tenant.run("ns", "describe", other)) == CHILDREN + (
        f'error: namespaces "{other}" is forbidden: User "{tenant.user}" cannot get resource '
        f'"namespaces" in API group "" in the namespace "{other}"\n'
    )


def test_a_grafted_child_shows_from_itself_and_the_notes_say_what_is_left_out(
    tenant: Tenant,
) -> None:
    """Issue 27 point 5. A namespace attached by its parent label alone (HNC's ``hns set
    --parent``, a graft by hand) has no SubNamespace, and nothing the tenant may read in the
    root names it: a view from the root leaves it out and says so; a view that starts at it
    shows it in its tree, as the administrator sees it."""
    scene, root, child = tenant.scene, tenant.root, tenant.child
    grafted = scene.namespace("legacy", {LABEL_PARENT: root})
    scene.wait(lambda: _copied(scene, grafted), "the tenant's RoleBinding copied to it")
    scene.wait(lambda: tenant.run("ns", "describe", grafted).returncode == 0, "the copied grant")
    first, second = sorted((child, grafted))
    marks = {child: "s", grafted: "g"}
    whole = f"{root} [r]\n├── {first} [{marks[first]}]\n└── {second} [{marks[second]}]\n\n"
    legend = f"{LEGEND}  [g] grafted: a parent label without a SubNamespace\n"
    by_admin = run_plugin("list", root, kubeconfig=scene.cluster.kubeconfig)
    assert succeeded(by_admin) == whole + legend

    assert limited(tenant.run("list", root)) == f"{root} [r]\n└── {child} [s]\n\n{LEGEND}\n"
    assert "grafted by its parent label alone" in TREES and "-n NS" in TREES
    assert limited(tenant.run("list", "-n", grafted)) == whole + legend
    # report reads the same view as list and says the same of it.
    reported = limited(tenant.run("report", root, "--key", "billing.example.com/*", "-o", "csv"))
    assert [line.split(",")[0] for line in reported.splitlines()] == ["namespace", root, child]
    from_grafted = limited(tenant.run("report", "-n", grafted, "--key", "none/*", "-o", "csv"))
    assert [line.split(",")[0] for line in from_grafted.splitlines()[1:]] == [root, first, second]
    described = limited(tenant.run("ns", "describe", root), CHILDREN)
    assert field(described, "Children") == f"1 ({child})"
    assert "a child grafted by its parent label alone is not counted" in CHILDREN
    assert field(limited(tenant.run("ns", "describe", grafted), CHILDREN), "Parent") == root


def test_the_webhooks_refusal_reaches_the_tenant_word_for_word(tenant: Tenant) -> None:
    """The naming policy is the webhook's alone; the plugin's message is the API server's,
    as ``kubectl create`` of the same SubNamespace shows it."""
    scene, root = tenant.scene, tenant.root
    name = scene.name("bad")
    by_kubectl = subprocess.run(
        ["kubectl", "create", "-f", "-", "--as", tenant.user],
        input=json.dumps(subnamespaces.build(root, name)),
        env=plugin_env(scene.cluster.kubeconfig),
        capture_output=True,
        text=True,
        check=False,
    )
    denial = by_kubectl.stderr.split('error when creating "STDIN": ', 1)[1]
    assert "by naming policy" in denial
    assert failed(tenant.run("sub", "create", name, root)) == f"error: {denial}"
    assert scene.sub(root, name) is None


def test_a_name_the_tenant_can_see_taken_is_refused_before_writing(tenant: Tenant) -> None:
    before = tenant.versions()
    assert failed(tenant.run("sub", "create", tenant.child, tenant.root)) == (
        f"error: namespace {tenant.child} already exists\n"
    )
    assert tenant.versions() == before


@pytest.mark.parametrize(
    ("command", "patched"),
    [
        (("sub", "cut", "{child}"), "{child}"),
        (("sub", "move", "{child}", "{sibling}"), "{child}"),
        (("template", "set", "{root}", "{template}"), "{root}"),
    ],
)
def test_administrator_commands_name_what_the_tenant_lacks(
    tenant: Tenant, command: tuple[str, ...], patched: str
) -> None:
    """Labelling namespaces needs rights on namespaces that ``admin`` does not give; the
    error says that it is for a cluster administrator and why, then quotes the API server,
    naming verb, resource and namespace, and nothing is written (the template, which the
    tenant may not even read, is left to the server to judge)."""
    scene = tenant.scene
    sibling = scene.subnamespace(tenant.root, "ok-db")
    scene.settle(tenant.root, sibling)
    names = {
        "child": tenant.child,
        "root": tenant.root,
        "sibling": sibling,
        "template": scene.namespace("tmpl", {LABEL_TYPE: TYPE_TEMPLATE}),
    }
    before = tenant.versions()
    target = patched.format(**names)
    refused = failed(tenant.run(*(part.format(**names) for part in command)))
    assert refused.startswith(
        f"error: only a cluster administrator may change the labels of namespace {target}, "
    ), refused
    assert refused.endswith(
        f'The API server says: namespaces "{target}" is forbidden: User "{tenant.user}" cannot '
        f'patch resource "namespaces" in API group "" in the namespace "{target}"\n'
    )
    assert tenant.versions() == before


def test_a_tenant_with_their_own_token_and_current_namespace(
    tenant: Tenant, apiserver: ApiServer, tmp_path: Path
) -> None:
    """Not impersonation: the tenant's own kubeconfig, whose context names their root."""
    root, child = tenant.root, tenant.child
    apiserver.add_user(tenant.user)
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "tenant", user=tenant.user)
    document = yaml.safe_load(kubeconfig.read_text())
    document["contexts"][0]["context"]["namespace"] = root
    kubeconfig.write_text(yaml.safe_dump(document))
    result = run_plugin("list", kubeconfig=kubeconfig)
    assert limited(result) == f"{root} [r]\n└── {child} [s]\n\n{LEGEND}\n"
    name = tenant.scene.name("ok-own")
    created = run_plugin("sub", "create", name, root, kubeconfig=kubeconfig)
    assert succeeded(created).startswith(f"created SubNamespace {root}/{name}")
