"""What a write transaction changed: each stream once; what it appended, kept only while the
appends follow one another at one generation's tail (anything else says "read again")."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import create_engine

from app.storage.changes import TailAppend, take_touched, touched
from app.storage.records import EventRecord, GenerationRecord
from tests.storage.fakes import generation_record

GEN = generation_record(tail_seq=2, terminal=False)


def _appended(gen: GenerationRecord, *seqs: int) -> TailAppend:
    return TailAppend(gen, tuple(EventRecord(seq, None, f"d{seq}") for seq in seqs))


def test_appends_that_follow_each_other_are_one_change_and_anything_else_is_read_again() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        touched(conn, 7, _appended(GEN, 1))
        touched(conn, 7, _appended(replace(GEN, tail_seq=2), 2))
        touched(conn, 8, _appended(replace(GEN, stream_pk=8), 1))
        touched(conn, 8, _appended(replace(GEN, stream_pk=8), 3))  # a gap: read again
        touched(conn, 9)
        touched(conn, 9, _appended(replace(GEN, stream_pk=9), 1))  # not only an append
        changes = take_touched(conn)
        assert take_touched(conn) == {}  # the next transaction starts clean
    engine.dispose()
    followed = changes[7]
    assert followed is not None
    assert [e.seq for e in followed.events] == [1, 2]
    assert followed.after == 0
    assert followed.generation.tail_seq == 2
    assert (changes[8], changes[9]) == (None, None)
