"""kubectl's generic flags, accepted by every command before or after the subcommand.

The Go plugin takes them only on the root command, but people type ``kubectl accurate sub
create x team --context prod`` the way they type any kubectl command, so every group and
command carries them. As with kubectl, a flag given later on the command line wins, and
``--as-group`` adds up. Namespaces are positional arguments here, as in the Go plugin;
``-n/--namespace`` only changes the current namespace, where a user who may not list
namespaces starts reading (``kubectl_accurate.reads``). ``--cache-dir`` is kubectl's too: where
discovery answers are kept (``kubectl_accurate.subnamespace_api``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from kubectl_accurate import preconnect

# The adapter is imported when a command connects: a command that only parses its command line
# (--help, --version, completion) then loads nothing of it (issue 18).
if TYPE_CHECKING:
    from libaccurate.network.kube import ConnectionOptions, Kube

F = TypeVar("F", bound=Callable[..., Any])
_STORE = "accurate.connection"
CACHE_DIR = "cache_dir"


class _Flag(NamedTuple):
    decls: tuple[str, ...]
    help: str
    metavar: str = ""
    is_flag: bool = False
    multiple: bool = False


# Keyed by the ConnectionOptions field each flag sets (CACHE_DIR is not a connection option).
_FLAGS: dict[str, _Flag] = {
    "kubeconfig": _Flag(("--kubeconfig",), "Path to the kubeconfig file to use.", "PATH"),
    "context": _Flag(("--context",), "The name of the kubeconfig context to use.", "NAME"),
    "cluster": _Flag(("--cluster",), "The name of the kubeconfig cluster to use.", "NAME"),
    "user": _Flag(("--user",), "The name of the kubeconfig user to use.", "NAME"),
    "impersonate": _Flag(("--as",), "Username to impersonate for the operation.", "USER"),
    "impersonate_groups": _Flag(
        ("--as-group",), "Group to impersonate; repeat for several groups.", "GROUP", multiple=True
    ),
    "token": _Flag(("--token",), "Bearer token for authentication to the API server.", "TOKEN"),
    "server": _Flag(("-s", "--server"), "The address and port of the API server.", "URL"),
    "certificate_authority": _Flag(
        ("--certificate-authority",), "Path to a cert file for the certificate authority.", "PATH"
    ),
    "client_certificate": _Flag(
        ("--client-certificate",), "Path to a client certificate file for TLS.", "PATH"
    ),
    "client_key": _Flag(("--client-key",), "Path to a client key file for TLS.", "PATH"),
    "insecure_skip_tls_verify": _Flag(
        ("--insecure-skip-tls-verify",),
        "Do not check the server's certificate (insecure).",
        is_flag=True,
    ),
    "tls_server_name": _Flag(
        ("--tls-server-name",), "Server name to use for certificate validation.", "NAME"
    ),
    "disable_compression": _Flag(
        ("--disable-compression",),
        "Do not ask the server to compress its responses.",
        is_flag=True,
    ),
    "request_timeout": _Flag(
        ("--request-timeout",),
        "How long to wait for one server request (30s, 1m; 0 means no limit).",
        "DURATION",
    ),
    "namespace": _Flag(
        ("-n", "--namespace"),
        "The current namespace, where a user who may not list namespaces starts reading.",
        "NS",
    ),
    CACHE_DIR: _Flag(
        ("--cache-dir",),
        "Where to cache discovery (default $KUBECACHEDIR, else ~/.kube/cache).",
        "PATH",
    ),
}

GENERIC_FLAGS_NOTE = (
    "kubectl's generic flags (--kubeconfig, --context, --as, --server, ...) work here too; "
    "see 'kubectl accurate --help'."
)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Record a flag given at this level; ``ctx.meta`` is shared by the whole command line."""
    if param.name and value not in (None, (), False):
        store = ctx.meta.setdefault(_STORE, {})
        if param.multiple:
            store[param.name] = (*store.get(param.name, ()), *value)
        else:
            store[param.name] = value
    return value


def generic_flags(*, shown: bool) -> Callable[[F], F]:
    """Add every generic flag to a command; ``shown`` lists them in its --help.

    Every command carries the hidden ones, so they are made once and shared (options hold no
    state of the command they are on): making them anew for each of some twenty commands was a
    good part of the plugin's start-up (issue 18). As click's own decorators do, they are kept on
    the function, last first, until the command is made from it.
    """

    def decorate(function: F) -> F:
        given: list[click.Parameter] = function.__dict__.setdefault("__click_params__", [])
        given.extend(reversed(_options(shown)))
        return function

    return decorate


@cache
def _options(shown: bool) -> tuple[click.Option, ...]:
    return tuple(
        click.Option(
            [*flag.decls, field_name],
            help=flag.help,
            metavar=flag.metavar or None,
            is_flag=flag.is_flag,
            multiple=flag.multiple,
            expose_value=False,
            hidden=not shown,
            callback=_remember,
        )
        for field_name, flag in _FLAGS.items()
    )


def connection_options(ctx: click.Context) -> ConnectionOptions:
    from libaccurate.network.kube import ConnectionOptions

    given = {k: v for k, v in ctx.meta.get(_STORE, {}).items() if k != CACHE_DIR}
    return ConnectionOptions(**given)


def cache_dir(ctx: click.Context) -> str | None:
    return ctx.meta.get(_STORE, {}).get(CACHE_DIR)


def connect(ctx: click.Context) -> Kube:
    """The client for the command's connection flags; the one the entry point started
    connecting before click loaded, when it started one for these flags."""
    return preconnect.connect(connection_options(ctx))
