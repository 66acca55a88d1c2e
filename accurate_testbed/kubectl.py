"""Running the real kubectl against a test cluster, as a user would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def kubectl(kubeconfig: Path, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against ``kubeconfig``; ``stdin`` is sent as is if it is text (YAML),
    as JSON otherwise. The caller checks the exit code: failing is often what a test wants."""
    text = stdin if stdin is None or isinstance(stdin, str) else json.dumps(stdin)
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
