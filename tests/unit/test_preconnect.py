"""The entry point connects ahead only for a ``list`` whose connection settings are surely the
defaults (and then runs it without click), and the command then gets what reading the
kubeconfig gave, once: the client, or the error (issue 29)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_accurate import preconnect, rendered
from libaccurate.network.kube import ConnectionOptions, KubeError

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: http://127.0.0.1:{port}
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
users:
- name: u
  user:
    token: t0ken
"""


@pytest.fixture
def port() -> Iterator[int]:
    """A port that takes connections (none is answered: nothing here sends a request)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


@pytest.fixture
def kubeconfig(tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG.format(port=port))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv(rendered.COMPLETE_VAR, raising=False)
    monkeypatch.setattr(preconnect, "_prepared", [])
    return path


@pytest.mark.parametrize("args", [["list"], ["ls"], ["list", "team-a"], ["ls", "team-a"]])
def test_list_without_flags_gets_the_client_made_ahead_once(
    kubeconfig: Path, port: int, args: list[str]
) -> None:
    assert preconnect.start(args)
    kube = preconnect.taken(ConnectionOptions())
    assert kube is not None
    assert kube.host == f"http://127.0.0.1:{port}"
    assert preconnect.taken(ConnectionOptions()) is None


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["list", "--context", "other"],
        ["list", "-n", "team-a"],
        ["list", "team-a", "--no-markers"],
        ["--kubeconfig", "/elsewhere", "list"],
        ["list", "team-a", "team-b"],
        ["sub", "list"],
        ["ns", "describe", "team-a"],
        ["sub", "create", "team-a-dev", "team-a"],
    ],
)
def test_other_command_lines_connect_when_the_command_does(
    kubeconfig: Path, args: list[str]
) -> None:
    assert not preconnect.start(args)
    assert preconnect.taken(ConnectionOptions()) is None


def test_shell_completion_connects_to_nothing(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(rendered.COMPLETE_VAR, "bash_complete")
    assert not preconnect.start(["list"])
    assert preconnect.taken(ConnectionOptions()) is None


def test_other_settings_than_the_defaults_do_not_get_the_client_made_ahead(
    kubeconfig: Path,
) -> None:
    preconnect.start(["list"])
    assert preconnect.taken(ConnectionOptions(context="other")) is None
    assert preconnect.taken(ConnectionOptions(insecure_skip_tls_verify=True)) is None


def test_a_kubeconfig_that_cannot_be_read_is_the_commands_error_once(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert preconnect.start(["list"])
    with pytest.raises(KubeError, match="no kubeconfig found"):
        preconnect.taken(ConnectionOptions())
    assert preconnect.taken(ConnectionOptions()) is None
