"""A new task as the rows it is stored as: its events' stream, their first generation (the
task's attempt 1) and the task, written together without reading anything back.

A new task's stream is new (its id is the task's fresh token), so its first generation is
epoch 1, supersedes nothing and is the stream's current one: the three rows are known before
anything is written, and each INSERT returns its row. `three_statements` is the default of
the dialect hook `Dialect.create_task` (three `INSERT … RETURNING`); PostgreSQL runs the same
three INSERTs as one statement (`app/storage/postgres.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, bindparam, insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from app.storage.schema import generations, streams, tasks

STREAM_COLUMNS = ("tenant", "stream_id", "last_epoch", "created_at", "updated_at")
GENERATION_COLUMNS = tuple(c.name for c in generations.columns if c.name not in ("id", "stream_pk"))
TASK_COLUMNS = tuple(c.name for c in tasks.columns)


@dataclass(frozen=True, slots=True)
class NewTaskRows:
    """The values of the three rows (the generation's but its `stream_pk`, which the
    stream's INSERT gives)."""

    stream: dict[str, Any]
    generation: dict[str, Any]
    task: dict[str, Any]

    def params(self) -> dict[str, Any]:
        """The bind parameters of the statements (`s_…`, `g_…`, `t_…` by table)."""
        return (
            {f"s_{k}": self.stream[k] for k in STREAM_COLUMNS}
            | {f"g_{k}": self.generation[k] for k in GENERATION_COLUMNS}
            | {f"t_{k}": self.task.get(k) for k in TASK_COLUMNS}
        )


@dataclass(frozen=True, slots=True)
class StoredTaskRows:
    """The rows as stored: the generation's (with its `id` and `stream_pk`) and the task's."""

    generation: Mapping[Any, Any]
    task: Mapping[Any, Any]


def bound_values(table: Table, prefix: str, columns: tuple[str, ...]) -> dict[str, Any]:
    """`column: :prefix_column` for each column, typed as the column (so a driver that casts
    its parameters casts them right)."""
    return {name: bindparam(f"{prefix}_{name}", type_=table.c[name].type) for name in columns}


STREAM_INSERT: Insert = (
    insert(streams).values(bound_values(streams, "s", STREAM_COLUMNS)).returning(streams.c.id)
)
TASK_INSERT: Insert = (
    insert(tasks).values(bound_values(tasks, "t", TASK_COLUMNS)).returning(*tasks.c)
)
_GENERATION_INSERT: Insert = (
    insert(generations)
    .values(bound_values(generations, "g", ("stream_pk", *GENERATION_COLUMNS)))
    .returning(*generations.c)
)


def three_statements(conn: Connection, rows: NewTaskRows) -> StoredTaskRows:
    """The stream, then its generation, then the task: one `INSERT … RETURNING` each."""
    params = rows.params()
    stream_pk = conn.execute(STREAM_INSERT, params).scalar_one()
    generation = conn.execute(_GENERATION_INSERT, params | {"g_stream_pk": stream_pk}).one()
    task = conn.execute(TASK_INSERT, params).one()
    return StoredTaskRows(generation._mapping, task._mapping)
