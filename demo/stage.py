"""Sets up the demo's cluster and takes it down again: the in-memory API server, the SubNamespace
CRD, accurate-controller and the registration of its webhooks.

The webhooks are registered the way the end-to-end tests register them (tests/e2e/webhooks.py):
the deploy manifests' configurations, pointed at the controller on 127.0.0.1 and trusting a CA
made for the demo, since there is no in-cluster Service to reach.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import trustme
import yaml

from accurate_testbed.certificates import ca_bundle, write_serving_pair
from accurate_testbed.manifests import MANIFESTS, namespace_hook_answers, registration, render
from accurate_testbed.processes import PROGRAM, free_port, stop
from accurate_testbed.waiting import wait_for
from demo.narrator import DemoError, Narrator
from kubectl_accurate.watched import DEFAULT_CONFIGMAP
from libaccurate.constants import SUBNAMESPACE_CRD_NAME
from libaccurate.network.kube import ConnectionOptions, Kube, KubeError

# Generous for a slow machine: each wait of the demo usually takes well under a second.
WAIT_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
# Log lines shown when the demo fails, so the reader sees why.
LOG_TAIL = 20
RBAC = "rbac.authorization.k8s.io"
# Where `kubectl accurate` looks for the controller's config by default (--accurate-namespace).
CONFIG_NAMESPACE = "accurate"
CONFIG = {
    "labelKeys": ["team"],
    "watches": [{"group": RBAC, "version": "v1", "kind": "RoleBinding"}],
}


def wait(condition: Callable[[], Any], what: str) -> None:
    """Wait until ``condition`` holds; a DemoError naming ``what`` once the deadline passes."""
    try:
        wait_for(condition, WAIT_TIMEOUT, what)
    except AssertionError as error:
        raise DemoError(str(error)) from None


@contextmanager
def stage(folder: Path, narrator: Narrator) -> Iterator[Kube]:
    """The demo cluster, ready for the tour, with the kubeconfig ``folder/kubeconfig``; a client
    for it. Everything started here is stopped on the way out, however the tour ends."""
    kubeconfig = folder / "kubeconfig"
    with ExitStack() as stack:
        logs: list[Path] = []
        try:
            _start_apiserver(stack, folder, kubeconfig, narrator, logs)
            kube = Kube.connect(ConnectionOptions(kubeconfig=str(kubeconfig)))
            _install_crd(narrator)
            ca = trustme.CA()
            webhooks = _start_controller(stack, folder, ca, narrator, logs)
            _register_webhooks(folder, webhooks, ca, narrator, kube)
            yield kube
        except (DemoError, KubeError):
            for log in logs:
                narrator.say(f"--- the last lines of {log.name} ---\n{_tail(log)}")
            raise
        finally:
            narrator.say("Stopping everything the demo started.")


def _start_apiserver(
    stack: ExitStack, folder: Path, kubeconfig: Path, narrator: Narrator, logs: list[Path]
) -> None:
    narrator.heading(
        "An in-memory Kubernetes API server",
        "A stand-in for kube-apiserver written for this project's tests, so the tour needs no "
        "real cluster; kubectl talks to it as to any other.",
    )
    command = [sys.executable, "-m", "accurate_testbed.apiserver", "--kubeconfig", str(kubeconfig)]
    process = _spawn(stack, command, folder / "apiserver.log", narrator, logs, narrator.cwd)

    def serving() -> bool:
        _check_running(process, "the API server")
        return kubeconfig.exists() and bool(logs[-1].read_text().strip())

    wait(serving, "the API server to start")
    narrator.say(f"Serving at {logs[-1].read_text().strip()}, kubeconfig {kubeconfig}\n")
    narrator.run("kubectl", "get", "namespaces")


def _install_crd(narrator: Narrator) -> None:
    narrator.heading(
        "The SubNamespace CRD",
        "A SubNamespace is what a tenant creates to ask for a namespace below one they own.",
    )
    narrator.run("kubectl", "apply", "-k", "controller/config/crd")
    crd = f"crd/{SUBNAMESPACE_CRD_NAME}"
    narrator.run("kubectl", "wait", "--for=condition=established", crd, "--timeout=30s")


def _start_controller(
    stack: ExitStack, folder: Path, ca: trustme.CA, narrator: Narrator, logs: list[Path]
) -> str:
    """Start accurate-controller serving its webhooks with a certificate from ``ca``; their
    base URL."""
    narrator.heading(
        "accurate-controller",
        "It creates the namespaces that SubNamespaces ask for and copies labels and objects "
        "down the trees. Its config says what to copy: the `team` label and RoleBindings.",
    )
    config = yaml.safe_dump(CONFIG, sort_keys=False)
    (folder / "config.yaml").write_text(config)
    narrator.say(f"$ cat config.yaml\n{config}")
    narrator.say(
        "On a cluster this file comes from a ConfigMap, which `kubectl accurate` reads too:\n"
    )
    narrator.run("kubectl", "create", "namespace", CONFIG_NAMESPACE)
    narrator.run(
        "kubectl",
        "create",
        "configmap",
        DEFAULT_CONFIGMAP,
        "-n",
        CONFIG_NAMESPACE,
        "--from-file=config.yaml",
        cwd=folder,
    )
    write_serving_pair(ca, folder / "certs")
    webhook_port, probe_port = free_port(), free_port()
    flags = ["--config-file", "config.yaml", "--no-leader-election"]
    flags += ["--webhook-addr", f"127.0.0.1:{webhook_port}", "--cert-dir", "certs"]
    flags += ["--health-probe-addr", f"127.0.0.1:{probe_port}", "--metrics-addr", "0"]
    flags += ["--kubeconfig", "kubeconfig", "--log-format", "json"]
    narrator.say(f"$ accurate-controller {' '.join(flags)} &")
    process = _spawn(stack, [str(PROGRAM), *flags], folder / "controller.log", narrator, logs)

    def ready() -> bool:
        _check_running(process, "the controller")
        return _get(f"http://127.0.0.1:{probe_port}/readyz") == 200

    wait(ready, "the controller to be ready")
    narrator.say("The controller is ready.\n")
    return f"https://127.0.0.1:{webhook_port}"


def _register_webhooks(
    folder: Path, base_url: str, ca: trustme.CA, narrator: Narrator, kube: Kube
) -> None:
    narrator.heading(
        "Admission webhooks",
        "The API server asks the controller before SubNamespaces and namespaces change, so "
        "that trees stay trees. On a cluster they reach the controller's Service; here, "
        "127.0.0.1.",
    )
    objects = render(MANIFESTS / "default")
    configurations = registration(objects, base_url, ca_bundle(ca), "demo")
    (folder / "webhooks.yaml").write_text(yaml.safe_dump_all(configurations))
    narrator.run("kubectl", "apply", "-f", "webhooks.yaml", cwd=folder)
    wait(
        lambda: namespace_hook_answers(kube, "webhook-probe"), "the API server to call the webhooks"
    )


def _spawn(
    stack: ExitStack,
    command: list[str],
    log: Path,
    narrator: Narrator,
    logs: list[Path],
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``command`` in ``cwd`` (else the demo folder) with its output in ``log``; stopped
    on exit."""
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=cwd or log.parent,
            env=narrator.env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    logs.append(log)
    stack.callback(stop, process, timeout=STOP_TIMEOUT)
    return process


def _check_running(process: subprocess.Popen[bytes], what: str) -> None:
    if process.poll() is not None:
        raise DemoError(f"{what} exited with code {process.returncode}")


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-LOG_TAIL:])
