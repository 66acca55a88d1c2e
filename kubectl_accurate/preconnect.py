"""Connects to the API server while click and the command tree load, for the command lines
that will surely send their first requests with the default connection settings.

Before ``list`` sends anything, the interpreter, click and the command tree take most of its
start-up; only then did it read the kubeconfig and open its two connections, each a TLS
handshake (and, on a real network, a TCP one) of a round trip or more. On a link of 30 ms that
was a tenth of the whole command (issue 29, bench/RESULTS.md). For ``list`` or ``ls`` with at
most a root and no flag at all (no flag can then change where it connects, or how), the entry
point reads the kubeconfig first, as the command would, and starts opening the connections that
``list`` sends its two LISTs on (``Kube.open_ahead``); the command then takes that connection
(``taken``) when its settings are the defaults, which they are on such a command line.

Whatever reading the kubeconfig gives is what the command gets: the same client, or the same
error, raised where the command would have raised it, so an exec plugin runs once and a broken
kubeconfig is reported once, the usual way. A connection that fails to open fails the request
that takes it, with the error it would have had opening it itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kubectl_accurate import rendered
from libaccurate import __version__

if TYPE_CHECKING:
    from libaccurate.network.kube import ConnectionOptions, Kube, KubeError

USER_AGENT = f"kubectl-accurate/{__version__}"
# The command words whose first requests go out on this many connections at once.
COMMANDS = {"list": 2, "ls": 2}

_prepared: list[Kube | KubeError] = []


def start(args: list[str]) -> bool:
    """Read the kubeconfig and start connecting, if the command line is one of ``COMMANDS``
    with at most one argument more and no flag; say whether it was."""
    if not args or args[0] not in COMMANDS or len(args) > 2:
        return False
    if any(arg.startswith("-") for arg in args) or rendered.COMPLETE_VAR in os.environ:
        return False  # a flag may change the connection; shell completion sends nothing
    from libaccurate.network.kube import ConnectionOptions, Kube, KubeError

    try:
        kube = Kube.connect(ConnectionOptions(), user_agent=USER_AGENT)
    except KubeError as error:
        _prepared.append(error)
        return True
    kube.open_ahead(COMMANDS[args[0]])
    _prepared.append(kube)
    return True


def connect(options: ConnectionOptions) -> Kube:
    """The client for these connection settings: the one ``start`` made, when it made one for
    them."""
    from libaccurate.network.kube import Kube

    return taken(options) or Kube.connect(options, user_agent=USER_AGENT)


def taken(options: ConnectionOptions) -> Kube | None:
    """The client ``start`` made, if it made one for these settings (the defaults): once, and
    its error raised instead when reading the kubeconfig failed."""
    from libaccurate.network.kube import ConnectionOptions

    if not _prepared or options != ConnectionOptions():
        return None
    prepared = _prepared.pop()
    if isinstance(prepared, Exception):
        raise prepared
    return prepared
