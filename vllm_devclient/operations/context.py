"""`CallContext`: what errors are built with (the URL, the secrets, the frontend, whose words hints use)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import Frontend
from ..redaction import NO_SECRETS, Secrets


@dataclass(frozen=True)
class CallContext:
    """What errors are built with: the client's URL as shown, its secrets, the frontend it has seen."""

    base_url: str = ""
    secrets: Secrets = NO_SECRETS
    frontend: Frontend = "unknown"
    # Whose words fix hints use: a Python caller's keywords, or the command line's flags.
    speaks: Literal["python", "cli"] = "python"
    prefix: str = ""  # the base URL's path, before every route's

    def hint(self, name: str, value: object = None) -> str:
        """An argument as the caller writes it: `deadline=` / `reset_running_requests=True`, or on the
        command line `--deadline` / `--reset-running-requests`."""
        if self.speaks == "cli":
            # A wait's request_timeout is the global --timeout there (the commands have no option of it).
            return "--timeout" if name == "request_timeout" else "--" + name.replace("_", "-")
        return f"{name}={value!r}" if value is not None else f"{name}="
