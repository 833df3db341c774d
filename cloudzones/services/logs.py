"""Logging setup for the command line and services: stderr, text or one JSON object per line.

Secrets never reach a log: nothing in cloudzones logs a credential, and the Azure SDK's HTTP
logging (which can print headers) is kept at WARNING.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and any ``extra`` fields."""

    _STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        payload.update({k: v for k, v in vars(record).items() if k not in self._STANDARD})
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure(*, level: str = "WARNING", fmt: str = "text") -> None:
    """Send cloudzones' logs to stderr at ``level`` in ``fmt`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # azure-core's HTTP logging policy prints request headers at INFO/DEBUG.
    for noisy in ("azure", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
