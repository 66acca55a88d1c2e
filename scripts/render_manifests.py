"""Writes the kustomize manifests' CRD and RBAC (controller/config) from the Helm chart's
templates (charts/accurate), rendered by the real Helm engine under the values that stand for
the kustomize base (tests/data/chart/kustomize-values.yaml: release ``accurate`` in namespace
``accurate``), so that the two cannot drift apart (issue 30; docs/design-notes.md, "One source
for the chart and the manifests").

Each file is one template's output, comments included, less the labels Helm adds for its own
bookkeeping. Run it after changing one of those templates::

    python scripts/render_manifests.py

``tests/test_manifests.py`` fails while a file differs from what this renders.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "accurate"
MANIFESTS = ROOT / "controller" / "config"
KUSTOMIZE_VALUES = ROOT / "tests" / "data" / "chart" / "kustomize-values.yaml"
RELEASE = NAMESPACE = "accurate"
# Labels the chart puts on every object for Helm's bookkeeping; the kustomize manifests have none.
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/name",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
)
# Each template, the file under controller/config it is written to, and the values it needs
# beyond KUSTOMIZE_VALUES (sudo is a directory of its own there, a switch in the chart).
TARGETS: dict[str, tuple[str, dict[str, Any]]] = {
    "crd.yaml": ("crd/subnamespaces.yaml", {}),
    "service-account.yaml": ("rbac/service_account.yaml", {}),
    "manager-role.yaml": ("rbac/manager_role.yaml", {}),
    "leader-election-role.yaml": ("rbac/leader_election_role.yaml", {}),
    "subnamespace-roles.yaml": ("rbac/subnamespace_roles.yaml", {}),
    "tenant-access.yaml": ("rbac/tenant_access.yaml", {}),
    "sudo.yaml": ("sudo/sudoer_keeper.yaml", {"tenantAccess": {"sudo": True}}),
    "quota-crd.yaml": ("quota/crd.yaml", {"quota": {"enabled": True}}),
    "quota-rbac.yaml": ("quota/rbac.yaml", {"quota": {"enabled": True}}),
}
HEADER = """\
# Generated from charts/accurate/templates/{template} by scripts/render_manifests.py:
# do not edit; change the template and run the script again (tests/test_manifests.py checks).
"""


class RenderError(Exception):
    """A template rendered to nothing, or to something the kustomize files cannot hold."""


def render() -> dict[Path, str]:
    """Every generated file and its text."""
    base = yaml.safe_load(KUSTOMIZE_VALUES.read_text(encoding="utf-8"))
    files = {}
    with helm.Chart.load(CHART) as chart:
        for template, (target, extra) in TARGETS.items():
            rendered = chart.render(
                values={**base, **extra}, name=RELEASE, namespace=NAMESPACE, is_install=True
            )
            text = rendered[f"{CHART.name}/templates/{template}"].strip()
            if not text:
                raise RenderError(f"templates/{template} renders nothing")
            files[MANIFESTS / target] = HEADER.format(template=template) + _unlabelled(text) + "\n"
    return files


def _unlabelled(text: str) -> str:
    """``text`` without Helm's labels in ``metadata.labels``, and without a ``labels:`` left
    empty. Lines, not YAML, so that the template's comments stay."""
    kept: list[str] = []
    block: list[str] | None = None  # the labels of the metadata being read, Helm's left out
    for line in [*text.splitlines(), ""]:
        if block is not None and line.startswith("    "):
            if line.strip().split(":")[0] not in HELM_LABELS:
                block.append(line)
            continue
        if block:
            kept += ["  labels:", *block]
        block = [] if line == "  labels:" else None
        if block is None:
            kept.append(line)
    return "\n".join(kept[:-1])


def main() -> None:
    try:
        files = render()
    except RenderError as error:
        sys.exit(f"error: {error}")
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
