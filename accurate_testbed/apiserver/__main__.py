"""``python -m accurate_testbed.apiserver --kubeconfig PATH [--port N] [--audit-log-path FILE]``:
serve until a signal.

For the demo and for manual checks with kubectl; tests use the fixtures in tests/conftest.py.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from accurate_testbed.apiserver.server import ApiServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accurate_testbed.apiserver", description=__doc__
    )
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write it")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any)")
    parser.add_argument(
        "--audit-log-path",
        type=Path,
        help="append an audit.k8s.io/v1 Event for each request to this file, one JSON line"
        " each, as kube-apiserver's flag of that name (level Metadata, stage ResponseComplete);"
        " written out once a second and at exit",
    )
    args = parser.parse_args(argv)
    try:
        server = ApiServer(port=args.port, audit_log=args.audit_log_path).start()
    except OSError as error:
        if error.filename is not None:
            problem = f"cannot write the audit log {error.filename}"
        else:
            problem = f"cannot serve on 127.0.0.1:{args.port}"
        print(f"error: {problem}: {error.strerror}", file=sys.stderr)
        return 1
    server.write_kubeconfig(args.kubeconfig)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(server.url, flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
