"""Alembic environment: the engine comes from planner.store.migrate (or DATABASE_URL).

On PostgreSQL a migration holds a session advisory lock (one per database and
schema) from before it reads the database's revision until it has committed, so
two app servers migrating one empty database at once run one after the other:
the second finds the first's head and has nothing to do.  SQLite needs no lock:
the whole migration is one transaction (``transactional_ddl``; Alembic's SQLite
default runs each statement on its own), and it begins IMMEDIATE, so the second
migrator waits for the first and then reads its revision.
"""

from __future__ import annotations

from alembic import context

from planner.store.db import make_engine, writer
from planner.store.migrate import MIGRATE_LOCK_SQL, MIGRATE_UNLOCK_SQL
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
            locked = connection.dialect.name == "postgresql"
            if locked:
                connection.execute(MIGRATE_LOCK_SQL)
                connection.commit()  # the lock is the session's: it outlives this transaction
            try:
                context.configure(
                    connection=connection,
                    target_metadata=target_metadata,
                    render_as_batch=connection.dialect.name == "sqlite",
                    transactional_ddl=True,
                    compare_type=True,
                )
                with context.begin_transaction():
                    context.run_migrations()
            finally:
                if locked:
                    if connection.in_transaction():
                        connection.rollback()  # a failed migration: nothing of it stays
                    connection.execute(MIGRATE_UNLOCK_SQL)
                    connection.commit()
    finally:
        if owned:
            engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
