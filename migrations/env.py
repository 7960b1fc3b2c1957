"""Alembic environment: the engine comes from planner.store.migrate (or DATABASE_URL)."""

from __future__ import annotations

from alembic import context

from planner.store.db import make_engine, writer
from planner.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    owned = engine is None
    if engine is None:
        engine = make_engine()
    try:
        with writer(engine).connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        if owned:
            engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
