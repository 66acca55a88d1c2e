"""controller.logs: what the controller's log lines look like on stderr, in a process of their own
(as the controller writes them), piped like a container runtime reads them or on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from controller.logs import setup_logging

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import logging, sys
from controller.logs import setup_logging
setup_logging(sys.argv[1], sys.argv[2])
setup_logging(sys.argv[1], sys.argv[2])
log = logging.getLogger("accurate.copies")
log.debug("looking")
log.info("copied %s", "cm/a", extra={"namespace": "team-a", "count": 2, "kinds": {"x"}})
log.warning("slow pass", extra={"seconds": 1.5})
try:
    1 / 0
except ZeroDivisionError:
    log.exception("write failed", extra={"namespace": "team b"})
"""
ESCAPE = "\x1b["


def run(fmt: str, level: str, env: dict[str, str] | None = None) -> str:
    """The program's stderr when piped."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, fmt, level],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stderr


def run_on_terminal(fmt: str, env: dict[str, str] | None = None) -> str:
    """The program's stderr when it is a terminal."""
    leader, follower = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-c", PROGRAM, fmt, "info"],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=follower,
            timeout=30,
            check=True,
        )
        os.close(follower)
        return read_all(leader)
    finally:
        os.close(leader)


def read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # Linux reports a closed pty's end as EIO
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_json_lines_carry_time_level_logger_message_and_extra_fields() -> None:
    entries = [json.loads(line) for line in run("json", "info").splitlines()]
    assert [entry["msg"] for entry in entries] == ["copied cm/a", "slow pass", "write failed"]
    copied, slow, failed = entries
    assert copied["level"] == "info" and copied["logger"] == "accurate.copies"
    assert copied["ts"].endswith("Z") and copied["ts"][:2] == "20"
    assert copied["namespace"] == "team-a" and copied["count"] == 2
    assert copied["kinds"] == "{'x'}"
    assert slow["level"] == "warning" and slow["seconds"] == 1.5
    assert failed["level"] == "error" and failed["namespace"] == "team b"
    assert "ZeroDivisionError" in failed["exception"]


def test_the_level_filters_lower_records() -> None:
    assert [json.loads(line)["msg"] for line in run("json", "WARN").splitlines()] == [
        "slow pass",
        "write failed",
    ]
    assert json.loads(run("json", "debug").splitlines()[0])["msg"] == "looking"
    assert [json.loads(line)["msg"] for line in run("json", "error").splitlines()] == [
        "write failed"
    ]


def test_text_is_readable_and_plain_when_piped() -> None:
    output = run("text", "info")
    assert ESCAPE not in output
    first = output.splitlines()[0]
    assert first.endswith(
        "INFO    accurate.copies: copied cm/a namespace=team-a count=2 kinds={'x'}"
    )
    assert 'namespace="team b"' in output
    assert "Traceback" in output and "ZeroDivisionError" in output


def test_auto_is_json_when_piped_as_in_a_container() -> None:
    lines = run("auto", "info").splitlines()
    assert json.loads(lines[0])["msg"] == "copied cm/a"


def test_auto_is_coloured_text_on_a_terminal_unless_no_color() -> None:
    coloured = run_on_terminal("auto")
    assert ESCAPE in coloured and "accurate.copies: copied cm/a" in coloured
    assert not coloured.lstrip().startswith("{")
    plain = run_on_terminal("text", env={"NO_COLOR": "1"})
    assert ESCAPE not in plain and "accurate.copies: slow pass seconds=1.5" in plain


@pytest.mark.parametrize(
    ("fmt", "level", "named"),
    [("xml", "info", "invalid log format 'xml'"), ("json", "loud", "invalid log level 'loud'")],
)
def test_bad_values_are_refused_by_name(fmt: str, level: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        setup_logging(fmt, level)
