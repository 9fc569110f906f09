"""The scopes the gateway records streams under (`app/gateway/scopes.py`): a keyed hash of
the session and the credential."""

from __future__ import annotations

from app.gateway.scopes import scope_of


def test_a_scope_is_one_session_under_one_credential() -> None:
    secret = b"k" * 32
    one = scope_of(secret, "session-1", "Bearer a")
    assert len(one) == 22
    assert one == scope_of(secret, "session-1", "Bearer a")  # any replica with the secret
    assert one != scope_of(secret, "session-2", "Bearer a")
    assert one != scope_of(secret, "session-1", "Bearer b")
    assert one != scope_of(b"x" * 32, "session-1", "Bearer a")
    assert "." not in one
