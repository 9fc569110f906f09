"""Observers: every hook of the base does nothing, and `Observers` calls each of its
observers, in order, with what it was told — for every hook there is."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from app.service.observer import Observer, Observers

HOOKS = sorted(
    name for name, value in vars(Observer).items() if not name.startswith("_") and callable(value)
)


def arguments(hook: str) -> tuple[object, ...]:
    """One distinct object per parameter of the hook (the observers only pass them on)."""
    parameters = list(inspect.signature(getattr(Observer, hook)).parameters)[1:]
    return tuple(object() for _ in parameters)


def recording(name: str, log: list[tuple[str, str, tuple[object, ...]]]) -> Observer:
    """An observer whose every hook notes (its name, the hook, the arguments)."""

    def hook_of(hook: str) -> Callable[..., None]:
        def record(_self: Observer, *args: object) -> None:
            log.append((name, hook, args))

        return record

    kind: type[Any] = type(f"Recording{name}", (Observer,), {h: hook_of(h) for h in HOOKS})
    observer: Observer = kind()
    return observer


def test_there_are_hooks_to_check() -> None:
    assert {"decided", "appended", "live_readers", "tasks_lost"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_the_base_observer_ignores_every_hook(hook: str) -> None:
    assert getattr(Observer(), hook)(*arguments(hook)) is None


@pytest.mark.parametrize("hook", HOOKS)
def test_observers_tell_each_observer_in_order(hook: str) -> None:
    log: list[tuple[str, str, tuple[object, ...]]] = []
    args = arguments(hook)
    getattr(Observers([recording("A", log), recording("B", log)]), hook)(*args)
    assert log == [("A", hook, args), ("B", hook, args)]
    getattr(Observers(), hook)(*args)  # none: nothing to tell
    assert len(log) == 2
