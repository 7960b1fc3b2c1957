"""Stored size of each scenario and revision (the save quota counts it; lists show it).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLES = ("scenarios", "scenario_revisions")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("stored_bytes", sa.BigInteger(), nullable=False, server_default="0"))
        # Rows saved before: the length of their JSON text (what the repository counts on a save).
        t = sa.table(table, sa.column("payload", sa.JSON()), sa.column("frozen_catalog", sa.JSON()),
                     sa.column("stored_bytes", sa.BigInteger()))
        op.execute(t.update().values(stored_bytes=(
            sa.func.length(sa.cast(t.c.payload, sa.Text()))
            + sa.func.coalesce(sa.func.length(sa.cast(t.c.frozen_catalog, sa.Text())), 0))))


def downgrade() -> None:
    for table in TABLES:
        # Native DROP COLUMN (SQLite >= 3.35), as in 0002: no table is recreated.
        op.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN stored_bytes"))
