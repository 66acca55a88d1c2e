"""The command line of ``accurate-controller``: the Go Accurate's flags plus the loop's settings.

Flags are read the way the Go controller reads them (see controller.goflags), with the same
names, defaults and value formats, so a Deployment's arguments carry over, Helm chart included.
The logging flags the Go controller gets from controller-runtime (``--zap-*``) set our log level
and format; klog's, and the zap ones we have no use for, are checked and then ignored, and
``ignored`` lists those given so that the controller can say so once. A malformed value or an
unknown flag is a usage error (exit 2) naming the flag, before anything starts.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from controller import goflags
from controller.goflags import Flag, UsageError
from controller.health import parse_addr
from controller.logs import FORMATS, LEVELS
from libaccurate import __version__
from libaccurate.constants import FEATURE_DISABLE_PROPAGATE_GENERATED

PROGRAM = "accurate-controller"
# The Go Accurate's default since 2026-04 (before: 50): no client-side limit unless asked for,
# as controller-runtime leaves it, relying on the API server's priority and fairness.
DEFAULT_QPS = 0.0
# Feature gates and their defaults, as the Go Accurate's --feature-gates knows them.
FEATURE_GATES: Mapping[str, bool] = {FEATURE_DISABLE_PROPAGATE_GENERATED: True}
# The stage of each gate, and the pseudo-gates that set every gate of a stage.
_GATE_STAGES: Mapping[str, str] = {FEATURE_DISABLE_PROPAGATE_GENERATED: "beta"}
_ALL_STAGES = {"AllAlpha": "alpha", "AllBeta": "beta"}
# An address of "0" turns a server off, as with controller-runtime.
DISABLED = "0"
# controller-runtime's default, so manifests written for the Go Accurate carry over.
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"

# controller-runtime's --zap-log-level names, as our levels; "panic" shows only what would
# crash the Go controller, so our nearest is errors only. An integer above 0 is a debug level.
ZAP_LEVELS = {"debug": "debug", "info": "info", "error": "error", "panic": "error"}
ZAP_ENCODERS = {"json": "json", "console": "text"}
_ZAP_STACKTRACE_LEVELS = ("info", "error", "panic")
_ZAP_TIME_ENCODINGS = ("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")
_KLOG_SEVERITIES = ("INFO", "WARNING", "ERROR", "FATAL")
_VMODULE_ITEM = re.compile(r"[^=,]+=\d+")
_BACKTRACE_AT = re.compile(r"[^:]+:\d+")


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
    # Flags given that are accepted for the Go controller's sake but change nothing, as typed.
    ignored: tuple[str, ...] = ()

    @property
    def propagate_generated(self) -> bool:
        return not self.feature_gates[FEATURE_DISABLE_PROPAGATE_GENERATED]


# Value conversions: each raises ValueError with the reason pflag would give.


def _text(text: str) -> str:
    return text


def _positive_duration(text: str) -> float:
    seconds = goflags.duration(text)
    if seconds <= 0:
        raise ValueError("must be longer than 0")
    return seconds


def _at_least(least: float, kind: Callable[[str], float]) -> Callable[[str], float]:
    """A number no smaller than ``least`` (0 for "0 turns it off", 1 for a count)."""
    wanted = "zero or more" if least == 0 else f"at least {least:g}"

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = least - 1
        if not least <= value < math.inf:
            raise ValueError(f"must be {wanted}")
        return value

    return convert


def _integer(text: str) -> int:
    """Go's strconv.ParseInt with base 10."""
    try:
        return int(text, 10)
    except ValueError:
        raise ValueError("must be an integer") from None


def _one_of(choices: Collection[str], fold: bool = False) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if (text.upper() if fold else text) not in choices:
            raise ValueError(f"use one of {', '.join(choices)}")
        return text

    return convert


def _matching(pattern: re.Pattern[str], example: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text and not all(pattern.fullmatch(item) for item in text.split(",")):
            raise ValueError(f"use the form {example}")
        return text

    return convert


def _address(text: str) -> str:
    if text != DISABLED:
        parse_addr(text)
    return text


def _feature_gates(text: str) -> dict[str, bool]:
    """``Name=true,Other=false``, as Kubernetes components take them, ``AllAlpha`` and
    ``AllBeta`` included: they set every gate of their stage not named on its own."""
    given: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        if name not in FEATURE_GATES and name not in _ALL_STAGES:
            known = ", ".join([*_ALL_STAGES, *sorted(FEATURE_GATES)])
            raise ValueError(f"unrecognized feature gate {name!r} (known: {known})")
        if not equals:
            raise ValueError(f"missing bool value for {name}")
        try:
            given[name] = goflags.boolean(value)
        except ValueError:
            raise ValueError(f"invalid value of {name}: {value!r} (use true or false)") from None
    gates = dict(FEATURE_GATES)
    for every, stage in _ALL_STAGES.items():
        if every in given:
            gates.update((gate, given[every]) for gate in gates if _GATE_STAGES[gate] == stage)
    gates.update((name, value) for name, value in given.items() if name in FEATURE_GATES)
    return gates


def _zap_level(text: str) -> str:
    """controller-runtime's level: a name, or an integer above 0 meaning a debug level."""
    if text in ZAP_LEVELS:
        return ZAP_LEVELS[text]
    if text.isdigit() and int(text) > 0:
        return "debug"
    raise ValueError(f"use one of {', '.join(ZAP_LEVELS)} or an integer above 0")


def _bool(name: str, help: str, default: str = "false") -> Flag:
    return Flag(name, goflags.boolean, default, help, kind="bool")


def _duration(name: str, default: str, help: str) -> Flag:
    return Flag(name, _positive_duration, default, help, kind="duration")


FLAGS: tuple[Flag, ...] = (
    _bool("version", "print the version and exit"),
    Flag("config-file", _text, "/etc/accurate/config.yaml", "configuration file path"),
    Flag("kubeconfig", _text, "", "kubeconfig file, for running outside the cluster"),
    Flag("metrics-addr", _address, ":8080", 'metrics address; "0" turns it off'),
    Flag("health-probe-addr", _address, ":8081", 'probe address; "0" turns it off'),
    Flag("webhook-addr", _address, ":9443", 'webhook address; "0" turns it off'),
    Flag("cert-dir", _text, DEFAULT_CERT_DIR, "directory with the webhook's tls.crt and tls.key"),
    _bool("leader-election", "elect a leader with a Lease in $POD_NAMESPACE", "true"),
    _bool("no-leader-election", "run a single controller without leader election"),
    Flag("leader-election-id", _text, "accurate", "name of the leader election Lease"),
    _duration("leader-election-lease-duration", "15s", "how long a leader's claim lasts"),
    _duration("leader-election-renew-deadline", "10s", "a leader that cannot renew stops"),
    _duration("leader-election-retry-period", "2s", "how often the Lease is renewed or tried"),
    Flag(
        "apiserver-qps-throttle",
        _at_least(0, float),
        f"{DEFAULT_QPS:g}",
        "most requests a second to the API server for each resource kind; 0: no client-side limit",
        kind="float",
    ),
    _bool(
        "webhook-allow-cascading-deletion",
        "allow deleting roots and sub-namespaces that have sub-namespaces",
    ),
    Flag(
        "feature-gates",
        _feature_gates,
        "",
        "Name=true|false,...; known: DisablePropagateGenerated (beta), AllAlpha, AllBeta",
        kind="mapStringBool",
    ),
    _duration("resync-period", "10m", "how often everything is listed again and checked"),
    Flag("workers", _at_least(1, int), "8", "writes sent at the same time", kind="int"),
    Flag("log-format", _one_of(FORMATS), "auto", "json, text, or auto: text on a terminal"),
    Flag("log-level", _one_of(LEVELS), "info", "debug, info, warn or error"),
    # controller-runtime's zap flags.
    _bool("zap-devel", "development defaults: text logs at debug level"),
    Flag("zap-encoder", _one_of(ZAP_ENCODERS), "json", "json, or console (text)", kind="encoder"),
    Flag("zap-log-level", _zap_level, "info", "debug, info, error, panic or N > 0", kind="level"),
    Flag(
        "zap-stacktrace-level",
        _one_of(_ZAP_STACKTRACE_LEVELS),
        "error",
        "ignored: errors always carry their traceback",
        kind="level",
    ),
    Flag(
        "zap-time-encoding",
        _one_of(_ZAP_TIME_ENCODINGS),
        "epoch",
        "ignored: times are always RFC 3339 in UTC",
        kind="time-encoding",
    ),
    # klog's flags: they govern client-go's own messages in the Go controller; ours has none.
    _bool("add_dir_header", "ignored (klog)"),
    _bool("alsologtostderr", "ignored (klog)"),
    Flag(
        "log_backtrace_at",
        _matching(_BACKTRACE_AT, "file.go:N"),
        "",
        "ignored (klog)",
        kind="traceLocation",
    ),
    Flag("log_dir", _text, "", "ignored (klog): logs always go to stderr"),
    Flag("log_file", _text, "", "ignored (klog): logs always go to stderr"),
    Flag("log_file_max_size", _at_least(0, int), "1800", "ignored (klog)", kind="uint"),
    _bool("logtostderr", "ignored (klog): logs always go to stderr", "true"),
    _bool("one_output", "ignored (klog)"),
    _bool("skip_headers", "ignored (klog)"),
    _bool("skip_log_headers", "ignored (klog)"),
    Flag(
        "stderrthreshold",
        _one_of((*_KLOG_SEVERITIES, "0", "1", "2", "3"), fold=True),
        "2",
        "ignored (klog)",
        kind="severity",
    ),
    Flag("v", _integer, "0", "ignored (klog verbosity)", kind="Level", shorthand="v"),
    Flag(
        "vmodule",
        _matching(_VMODULE_ITEM, "pattern=N,..."),
        "",
        "ignored (klog)",
        kind="moduleSpec",
    ),
)
# Flags that are checked but change nothing.
IGNORED = frozenset(flag.name for flag in FLAGS if flag.help.startswith("ignored"))


def parse(argv: Sequence[str] | None = None) -> Options:
    """Parse the command line; exits with status 2 and a usage message when it is wrong."""
    try:
        parsed = goflags.parse(FLAGS, sys.argv[1:] if argv is None else argv)
    except UsageError as error:
        _exit(2, f"{PROGRAM}: {error}\nRun '{PROGRAM} --help' for the flags.", sys.stderr)
    if parsed.help:
        _exit(0, f"Usage of {PROGRAM}:\n{goflags.usage(FLAGS)}", sys.stdout)
    values = parsed.values
    if values["version"]:
        _exit(0, f"{PROGRAM} {__version__}", sys.stdout)
    log_format, log_level = _logging(values, parsed.given)
    return Options(
        config_file=values["config-file"],
        metrics_addr=values["metrics-addr"],
        health_probe_addr=values["health-probe-addr"],
        webhook_addr=values["webhook-addr"],
        cert_dir=values["cert-dir"],
        leader_election=values["leader-election"] and not values["no-leader-election"],
        leader_election_id=values["leader-election-id"],
        lease_duration=values["leader-election-lease-duration"],
        renew_deadline=values["leader-election-renew-deadline"],
        retry_period=values["leader-election-retry-period"],
        qps=values["apiserver-qps-throttle"],
        allow_cascading_deletion=values["webhook-allow-cascading-deletion"],
        feature_gates=values["feature-gates"],
        kubeconfig=values["kubeconfig"] or None,
        resync_period=values["resync-period"],
        workers=int(values["workers"]),
        log_format=log_format,
        log_level=log_level,
        ignored=tuple(_spelled(name) for name in parsed.given if name in IGNORED),
    )


def _logging(values: Mapping[str, Any], given: Collection[str]) -> tuple[str, str]:
    """Our flags win over zap's, which win over the defaults of ``--zap-devel``."""
    log_format, log_level = "auto", "info"
    if values["zap-devel"]:
        log_format, log_level = "text", "debug"
    if "zap-encoder" in given:
        log_format = ZAP_ENCODERS[values["zap-encoder"]]
    if "zap-log-level" in given:
        log_level = values["zap-log-level"]
    if "log-format" in given:
        log_format = values["log-format"]
    if "log-level" in given:
        log_level = values["log-level"]
    return log_format, log_level


def _spelled(name: str) -> str:
    return f"-{name}" if len(name) == 1 else f"--{name}"


def _exit(code: int, message: str, stream: Any) -> NoReturn:
    print(message, file=stream)
    sys.exit(code)
