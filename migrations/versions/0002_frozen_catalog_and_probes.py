"""Frozen catalog entries on scenarios and revisions; probe runs and samples.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: "catalog not frozen"; the next save freezes it.
    for table in ("scenarios", "scenario_revisions"):
        op.add_column(table, sa.Column("frozen_catalog", sa.JSON(), nullable=True))
    op.create_table(
        "probe_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=True),
        sa.Column("endpoint_url", sa.String(length=2000), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenarios.id"],
            name="fk_probe_runs_scenario_id_scenarios", ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_probe_runs"),
    )
    op.create_index("ix_probe_runs_scenario_id", "probe_runs", ["scenario_id"])
    op.create_table(
        "probe_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ttft_s", sa.Float(), nullable=True),
        sa.Column("e2e_s", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["probe_runs.id"],
            name="fk_probe_samples_run_id_probe_runs", ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_probe_samples"),
    )
    op.create_index("ix_probe_samples_run_id", "probe_samples", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_probe_samples_run_id", table_name="probe_samples")
    op.drop_table("probe_samples")
    op.drop_index("ix_probe_runs_scenario_id", table_name="probe_runs")
    op.drop_table("probe_runs")
    for table in ("scenario_revisions", "scenarios"):
        # Native DROP COLUMN (SQLite >= 3.35): a batch "recreate" would drop the
        # scenarios table, and with foreign keys on that cascades to revisions.
        op.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN frozen_catalog"))
