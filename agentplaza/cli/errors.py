"""What a command that cannot go on raises: the hub's refusal, or no hub at all.

Kept apart from ``cli.client`` so a command that never talks to a hub (``--help``, ``hub list``)
does not load HTTP.
"""

from __future__ import annotations


class HubError(Exception):
    def __init__(self, message: str, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


class Unreachable(HubError):
    pass
