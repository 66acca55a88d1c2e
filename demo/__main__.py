"""``python -m demo``: run the tour on a cluster of its own, from the repository's root.

Everything it starts is stopped again when the tour ends, fails, or is interrupted with Ctrl-C
or SIGTERM; the exit code says which (0, 1, 130 or 143).
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

from accurate_testbed.processes import environment
from demo.narrator import DemoError, Narrator
from demo.stage import stage
from demo.tour import tour
from libaccurate.network.kube import KubeError

REPOSITORY = Path(__file__).resolve().parents[1]
INTERRUPTED = 130
TERMINATED = 143


def main() -> int:
    if shutil.which("kubectl") is None:
        print("error: the demo needs kubectl on PATH (https://kubernetes.io/docs/tasks/tools/)")
        return 1
    signal.signal(signal.SIGTERM, _terminated)
    with tempfile.TemporaryDirectory(prefix="accurate-demo-") as temporary:
        folder = Path(temporary)
        # kubectl caches discovery per host and port; a fresh server on a reused port must not
        # be described by an earlier run's cache.
        env = environment(KUBECONFIG=str(folder / "kubeconfig"), KUBECACHEDIR=str(folder / "cache"))
        narrator = Narrator(env, REPOSITORY)
        try:
            with stage(folder, narrator) as kube:
                tour(narrator, kube)
        except (DemoError, KubeError) as error:
            print(f"\nThe demo failed: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("\nInterrupted; everything the demo started is stopped.", file=sys.stderr)
            return INTERRUPTED
    print("\nThat was the tour. See README.md and docs/ for more.")
    return 0


def _terminated(signum: int, frame: FrameType | None) -> None:
    """Leave through the cleanups, as Ctrl-C does."""
    raise SystemExit(TERMINATED)


if __name__ == "__main__":
    raise SystemExit(main())
