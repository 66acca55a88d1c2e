"""Log records of the controller process, as JSON lines for log collectors or readable text for a
person at a terminal.

Structured fields travel as logging's ``extra=`` mapping, so the rest of the code uses the
standard ``logging`` API and never formats values into messages that a collector must parse.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from datetime import datetime, timezone
from typing import Any, TextIO

FORMATS = ("auto", "json", "text")
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
_COLOURS = {
    logging.DEBUG: "\x1b[2m",
    logging.INFO: "\x1b[36m",
    logging.WARNING: "\x1b[33m",
    logging.ERROR: "\x1b[31m",
    logging.CRITICAL: "\x1b[1;31m",
}
_RESET = "\x1b[0m"

_installed: logging.Handler | None = None


def setup_logging(fmt: str, level: str) -> None:
    """Send every log record at ``level`` or above to stderr in format ``fmt``.

    Calling it again replaces the handler it installed before, so a test or a reload never
    doubles the output; handlers installed by others are left alone.
    """
    global _installed
    if fmt not in FORMATS:
        raise ValueError(f"invalid log format {fmt!r}: use one of {', '.join(FORMATS)}")
    threshold = LEVELS.get(level.lower())
    if threshold is None:
        raise ValueError(f"invalid log level {level!r}: use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_formatter(fmt, sys.stderr))
    root = logging.getLogger()
    if _installed is not None:
        root.removeHandler(_installed)
    root.addHandler(handler)
    root.setLevel(threshold)
    _installed = handler


def _formatter(fmt: str, stream: TextIO) -> logging.Formatter:
    """ "auto" is text for a person at a terminal, JSON for the container's log collector."""
    terminal = stream.isatty()
    if fmt == "json" or (fmt == "auto" and not terminal):
        return JsonFormatter()
    return TextFormatter(colour=terminal and not os.environ.get("NO_COLOR"))


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller attached with ``extra=``."""
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _exception(record: logging.LogRecord) -> str | None:
    if not record.exc_info or record.exc_info[0] is None:
        return None
    return "".join(traceback.format_exception(*record.exc_info)).rstrip()


class JsonFormatter(logging.Formatter):
    """One JSON object per line; values JSON cannot hold are written as their str()."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **extra_fields(record),
        }
        error = _exception(record)
        if error:
            entry["exception"] = error
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...``, the level coloured when ``colour``."""

    def __init__(self, colour: bool) -> None:
        super().__init__()
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        level = f"{record.levelname:<7}"
        if self.colour:
            level = f"{_COLOURS.get(record.levelno, '')}{level}{_RESET}"
        fields = "".join(f" {k}={_text_value(v)}" for k, v in extra_fields(record).items())
        line = f"{_timestamp(record)} {level} {record.name}: {record.getMessage()}{fields}"
        error = _exception(record)
        return f"{line}\n{error}" if error else line


def _text_value(value: Any) -> str:
    """Bare when it reads unambiguously, JSON-quoted when it has spaces or quotes."""
    native = isinstance(value, (bool, int, float, list, dict, tuple)) or value is None
    text = json.dumps(value, default=str) if native else str(value)
    if text and not any(c.isspace() or c in '"=' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)
