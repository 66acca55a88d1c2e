"""The command line of ``accurate-controller``: the Go Accurate's flags plus the loop's settings.

Flag names, defaults and value formats follow the Go controller where it has the flag, so a
Deployment's arguments carry over; durations read like Go's (``90s``, ``10m``) or as seconds.
A malformed value is a usage error (exit 2) naming the flag, before anything starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controller.health import parse_addr
from controller.logs import FORMATS, LEVELS
from libaccurate import __version__
from libaccurate.constants import FEATURE_DISABLE_PROPAGATE_GENERATED
from libaccurate.kube import KubeError, parse_duration

PROGRAM = "accurate-controller"
# The Go Accurate's default: an operator moving over keeps the same load on the API server.
DEFAULT_QPS = 50.0
# Feature gates and their defaults, as the Go Accurate's --feature-gates knows them.
FEATURE_GATES: Mapping[str, bool] = {FEATURE_DISABLE_PROPAGATE_GENERATED: True}
# An address of "0" turns a server off, as with controller-runtime.
DISABLED = "0"
# controller-runtime's default, so manifests written for the Go Accurate carry over.
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"


@dataclass(frozen=True)
class Options:
    """The parsed command line."""

    config_file: str
    metrics_addr: str
    health_probe_addr: str
    webhook_addr: str
    cert_dir: str
    leader_election: bool
    leader_election_id: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    qps: float
    allow_cascading_deletion: bool
    feature_gates: Mapping[str, bool]
    kubeconfig: str | None
    resync_period: float
    workers: int
    log_format: str
    log_level: str

    @property
    def propagate_generated(self) -> bool:
        return not self.feature_gates[FEATURE_DISABLE_PROPAGATE_GENERATED]


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except KubeError:
        seconds = None
    if not seconds:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use seconds or a Go duration such as 30s or 10m"
        )
    return seconds


def _at_least(least: float, kind: Callable[[str], float]) -> Callable[[str], float]:
    """A number no smaller than ``least`` (0 for "0 turns it off", 1 for a count)."""
    wanted = "zero or more" if least == 0 else f"at least {least:g}"

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: must be {wanted}")
        return value

    return convert


def _address(text: str) -> str:
    if text == DISABLED:
        return text
    try:
        parse_addr(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return text


def _feature_gates(text: str) -> dict[str, bool]:
    """``Name=true,Other=false``, as Kubernetes components take them."""
    gates = dict(FEATURE_GATES)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        if name not in FEATURE_GATES:
            known = ", ".join(sorted(FEATURE_GATES))
            raise argparse.ArgumentTypeError(f"unrecognized feature gate {name!r} (known: {known})")
        if not equals or value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(
                f"invalid value of {name}: {value!r} (use true or false)"
            )
        gates[name] = value.lower() == "true"
    return gates


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Accurate controller: sub-namespaces, inheritance and propagation.",
    )
    add = parser.add_argument
    add("--version", action="version", version=f"{PROGRAM} {__version__}")
    add("--config-file", default="/etc/accurate/config.yaml", help="configuration file path")
    add("--kubeconfig", help="kubeconfig file, for running outside the cluster")
    add("--metrics-addr", type=_address, default=":8080", help='metrics address; "0" turns off')
    add("--health-probe-addr", type=_address, default=":8081", help='probe address; "0" turns off')
    add("--webhook-addr", type=_address, default=":9443", help='webhook address; "0" turns off')
    add(
        "--cert-dir",
        default=DEFAULT_CERT_DIR,
        help="directory with the webhook's tls.crt and tls.key (reloaded when they change)",
    )
    add(
        "--leader-election",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect a leader with a Lease in $POD_NAMESPACE (turn off for a single local run)",
    )
    add("--leader-election-id", default="accurate", help="name of the leader election Lease")
    add("--leader-election-lease-duration", type=_duration, default=15.0, metavar="DURATION")
    add("--leader-election-renew-deadline", type=_duration, default=10.0, metavar="DURATION")
    add("--leader-election-retry-period", type=_duration, default=2.0, metavar="DURATION")
    add(
        "--apiserver-qps-throttle",
        type=_at_least(0, float),
        default=DEFAULT_QPS,
        help="the most requests a second sent to the API server; 0: no client-side limit",
    )
    add(
        "--webhook-allow-cascading-deletion",
        action="store_true",
        help="allow deleting roots and sub-namespaces that have sub-namespaces",
    )
    add(
        "--feature-gates",
        type=_feature_gates,
        default=dict(FEATURE_GATES),
        help="Name=true|false,...; known: DisablePropagateGenerated (default true)",
    )
    add(
        "--resync-period",
        type=_duration,
        default=600.0,
        metavar="DURATION",
        help="how often everything is listed again and checked, whatever the watches say",
    )
    add("--workers", type=_at_least(1, int), default=8, help="writes sent at the same time")
    add("--log-format", choices=FORMATS, default="auto", help="auto: text on a terminal, else json")
    add("--log-level", choices=sorted(LEVELS), default="info")
    return parser


def parse(argv: Sequence[str] | None = None) -> Options:
    """Parse the command line; exits with status 2 and a usage message when it is wrong."""
    args = _parser().parse_args(argv)
    return Options(
        config_file=args.config_file,
        metrics_addr=args.metrics_addr,
        health_probe_addr=args.health_probe_addr,
        webhook_addr=args.webhook_addr,
        cert_dir=args.cert_dir,
        leader_election=args.leader_election,
        leader_election_id=args.leader_election_id,
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
        qps=args.apiserver_qps_throttle,
        allow_cascading_deletion=args.webhook_allow_cascading_deletion,
        feature_gates=args.feature_gates,
        kubeconfig=args.kubeconfig,
        resync_period=args.resync_period,
        workers=int(args.workers),
        log_format=args.log_format,
        log_level=args.log_level,
    )
