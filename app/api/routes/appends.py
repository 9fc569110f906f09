"""What every append answers alike, by REST route (`writer`, `tasks`) or channel frame: a
batch stored is 201, a verified retry (the same `first_seq` and content) is 200 and
stores nothing twice, each with its route's own body."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import status
from pydantic import BaseModel

from app.api.problems import problem_responses
from app.api.schemas import EventIn
from app.domain.append import EventBody
from app.storage.records import AppendResult


def append_responses(answer: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` of an append route: its 200 retry (with `answer`, the body its
    201 has too) and the problems an append meets."""
    return {
        200: {"model": answer, "description": "A verified retry: nothing stored twice"},
        **problem_responses(404, 409, 413, 415, 422),
    }


def appended_status(result: AppendResult) -> int:
    """201 for a batch stored now, 200 for a verified retry."""
    return status.HTTP_200_OK if result.duplicate else status.HTTP_201_CREATED


def event_bodies(events: Sequence[EventIn]) -> list[EventBody]:
    """A batch's events as the append use case takes them."""
    return [EventBody(data=e.data, event=e.event) for e in events]
