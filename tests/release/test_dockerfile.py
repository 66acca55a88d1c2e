"""The controller image's Dockerfile, read statically: no container engine runs where the tests
run, so ``docker build`` itself is left to the release workflow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from libaccurate import __version__

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = ROOT / "controller" / "config" / "manager" / "deployment.yaml"
KUSTOMIZATION = ROOT / "controller" / "config" / "default" / "kustomization.yaml"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def test_runs_accurate_controller_as_the_deployments_non_root_user() -> None:
    stage = final_stage()
    (base,) = [args for op, args in stage if op == "FROM"]
    assert re.fullmatch(r"python:3\.\d+-slim", base)
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
    user = f"{pod_security['runAsUser']}:{pod_security['runAsGroup']}"
    assert [args for op, args in stage if op == "USER"] == [user]
    (entrypoint,) = [args for op, args in stage if op == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["accurate-controller"]
    assert not [args for op, args in stage if op in ("RUN", "VOLUME")], "writes at run time"


def test_never_writes_bytecode_or_keeps_a_pip_cache() -> None:
    env = " ".join(args for op, args in instructions() if op == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PIP_NO_CACHE_DIR=1" in env
    assert all("--no-cache-dir" in args for op, args in instructions() if "pip install" in args)


def test_copies_only_the_package_sources() -> None:
    """No ADD (remote URLs, archives) and nothing from the build context but the package, so
    no kubeconfig or key in the working tree can end up in an image layer."""
    steps = instructions()
    assert not [args for op, args in steps if op == "ADD"]
    from_context = [
        word
        for op, args in steps
        if op == "COPY" and not args.startswith("--from=")
        for word in args.split()[:-1]
    ]
    allowed = {"pyproject.toml", "README.md", "LICENSE", "libaccurate", "kubectl_accurate"}
    assert set(from_context) <= allowed | {"controller"}
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert rules[0] == "*", ".dockerignore must exclude everything first (an allowlist)"
    assert {rule.strip("!/") for rule in rules if rule.startswith("!")} == set(from_context)


def test_image_is_the_one_the_manifests_deploy() -> None:
    deployment = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    repository, tag = container["image"].rsplit(":", 1)
    assert tag == __version__
    (image,) = yaml.safe_load(KUSTOMIZATION.read_text(encoding="utf-8"))["images"]
    assert image == {"name": repository, "newTag": __version__}
    labels = " ".join(args for op, args in final_stage() if op == "LABEL")
    source = re.search(r'org\.opencontainers\.image\.source="https://github\.com/([^"]+)"', labels)
    assert source and repository == f"ghcr.io/{source.group(1)}"
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    assert f"tags: {repository}:" in workflow
