"""writer leases (lease, pipeline window, abandoned mark); secrets shared by replicas

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 09:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("generations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("lease_seconds", sa.Integer(), server_default="30", nullable=False)
        )
        # Null: a generation opened before leases existed; it is never abandoned.
        batch_op.add_column(
            sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("pipeline", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("abandoned_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_generations_lease_expires_at", ["lease_expires_at"], unique=False)
    op.create_table(
        "secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_secrets")),
    )


def downgrade() -> None:
    op.drop_table("secrets")
    with op.batch_alter_table("generations", schema=None) as batch_op:
        batch_op.drop_index("ix_generations_lease_expires_at")
        batch_op.drop_column("abandoned_at")
        batch_op.drop_column("pipeline")
        batch_op.drop_column("lease_expires_at")
        batch_op.drop_column("lease_seconds")
