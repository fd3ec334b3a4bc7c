"""Secrets (the API key, a password in the base URL) and the one function that takes them out of text.

Every error message, error attribute and log line the SDK builds from what it sent or what a server
answered goes through `Secrets.redact` (see `errors.py` and `operations/failures.py`): a server that echoes
the key, or a URL that carries a password, never puts either into an exception or a log record.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MASK", "Secrets"]

MASK = "***"
# Shorter strings are not treated as secrets: masking "a" everywhere would garble every message.
_MIN_SECRET = 4


@dataclass(frozen=True)
class Secrets:
    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, *candidates: str | None) -> Secrets:
        found: set[str] = set()
        for value in candidates:
            if not value:
                continue
            for form in (value, value.strip()):
                if len(form) >= _MIN_SECRET:
                    found.add(form)
        # Longest first, so a secret that contains another is masked whole.
        return cls(tuple(sorted(found, key=len, reverse=True)))

    def redact(self, text: str) -> str:
        for secret in self.values:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def __repr__(self) -> str:
        return f"Secrets(<{len(self.values)} hidden>)"


NO_SECRETS = Secrets()
