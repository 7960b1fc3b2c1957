"""The scenario list over a crowded store: rows read, time and peak memory of one list
page, the whole list (summaries), and opening one traced scenario; then the Scenarios
page's first run and a rerun under AppTest (SQLite scratch file, or DATABASE_URL).

    .venv/bin/python bench/store_list.py [--scenarios 500] [--traced 150]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import sqlalchemy as sa  # noqa: E402

from planner import Scenario  # noqa: E402
from planner.spec.scenario import MAX_TRACE_ROWS  # noqa: E402
from planner.store import (  # noqa: E402
    database_url,
    get_scenario,
    list_scenarios,
    make_engine,
    save_scenario,
    scenario_page,
)
from planner.store.migrate import upgrade  # noqa: E402


def measure(label: str, fn: Callable[[], Any]) -> Any:
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"{label:<42} {dt * 1e3:9.1f} ms   peak {peak / 2**20:8.2f} MiB")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=500)
    parser.add_argument("--traced", type=int, default=150, help="how many of them have a 100k-row trace")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if not os.environ.get("DATABASE_URL"):
        os.environ["RIDGELINE_DB"] = os.path.join(tempfile.mkdtemp(prefix="ridgeline-bench-"), "bench.db")
    upgrade()
    engine = make_engine(database_url())
    t0 = time.perf_counter()
    for i in range(args.scenarios):
        if i < args.traced:
            rows = tuple((500 + (i * 11 + k) % 2000, 50 + k % 300) for k in range(MAX_TRACE_ROWS))
            s = Scenario(workload={"distribution": "trace", "trace": rows})
        else:
            s = Scenario(workload={"requests_per_s": 1.0 + i})
        save_scenario(engine=engine, scenario=s, name=f"bench {i}", tags=["trace"] if i < args.traced else [])
    with engine.connect() as conn:
        held = int(conn.execute(sa.text("SELECT sum(stored_bytes) FROM scenarios")).scalar_one())
    print(f"seeded {args.scenarios} scenarios ({args.traced} traced, {held / 2**20:.0f} MiB of JSON) "
          f"in {time.perf_counter() - t0:.0f} s")
    page = measure("scenario_page (one page of summaries)", lambda: scenario_page(engine=engine))
    measure(f"list_scenarios (all {args.scenarios} summaries)", lambda: list_scenarios(engine=engine))
    if args.traced:
        measure("get_scenario (one traced, payload read)", lambda: get_scenario(engine=engine, ref="bench-0"))
    print(f"page 1 of {page.pages}: {len(page.items)} rows of {page.total}")
    from tests.apptest_v2 import new_app_test

    at = new_app_test(timeout=300)
    at.run()
    measure("Scenarios page, first run (AppTest)", lambda: at.switch_page("pages/scenarios.py").run())
    measure("Scenarios page, a rerun (AppTest)", lambda: at.text_input(key="sc_desc").set_value("x").run())
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
