"""The three verdicts of the service's resume decision (the contract's `verdict` field)."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """What a writer does with a client's `Last-Event-ID`.

    `RESUME`: send the events after it. `RESET`: refuse to splice; the client discards its
    partial state and starts over. `INVALID`: the client is wrong (or spoofing).
    """

    RESUME = "resume"
    RESET = "reset"
    INVALID = "invalid"
