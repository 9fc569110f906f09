"""decision audit log; indexes for retention and the admin listing

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 02:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "decisions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("stream_id", sa.String(length=256), nullable=True),
        sa.Column("last_event_id", sa.String(length=300), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("generation", sa.String(length=64), nullable=True),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
    )
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.create_index("ix_decisions_decided_at", ["decided_at"], unique=False)
        batch_op.create_index("ix_decisions_stream_id", ["stream_id"], unique=False)
    with op.batch_alter_table("generations", schema=None) as batch_op:
        batch_op.create_index("ix_generations_expired_at", ["expired_at"], unique=False)
    with op.batch_alter_table("streams", schema=None) as batch_op:
        batch_op.create_index("ix_streams_stream_id", ["stream_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("streams", schema=None) as batch_op:
        batch_op.drop_index("ix_streams_stream_id")
    with op.batch_alter_table("generations", schema=None) as batch_op:
        batch_op.drop_index("ix_generations_expired_at")
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_index("ix_decisions_stream_id")
        batch_op.drop_index("ix_decisions_decided_at")
    op.drop_table("decisions")
