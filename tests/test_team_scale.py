"""Team scale: two app servers (two streamlit processes on two loopback ports)
on one PostgreSQL database, in a schema of its own created and dropped here.

A scenario saved through server A's Scenarios page opens by its link on server
B with the same numbers; two people updating it from the two servers (each
server's own engine, the store's expected-version check) get a clear
conflict, and no revision is lost."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.browser_support import (
    CHROMIUM,
    LAUNCH_ARGS,
    choose,
    chromium_or_skip,
    expect_number,
    nav,
    serve,
    set_number,
    settled,
)
from tests.store_support import PG_URL, postgres_or_skip

chromium_or_skip()

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from planner import ConflictError, scenario_from_dict  # noqa: E402
from planner.store import get_scenario, list_revisions, make_engine, update_scenario  # noqa: E402
from planner.store.migrate import upgrade  # noqa: E402

NAME, SLUG = "Team review", "team-review"


@pytest.fixture()
def pg_url() -> Iterator[str]:
    """A migrated, empty schema on the local PostgreSQL, dropped afterwards."""
    postgres_or_skip()
    schema = f"rl_team_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    try:
        upgrade(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


def _plan_numbers(page: Page) -> list[str]:
    """Every headline number on the Plan page, in order."""
    values = page.locator("[data-testid='stMain'] [data-testid='stMetricValue']")
    expect(values.first).to_be_visible()
    return [v.strip() for v in values.all_inner_texts()]


def test_two_servers_one_database(pg_url: str) -> None:
    with serve(database_url=pg_url) as a, serve(database_url=pg_url) as b, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        # Person 1 on server A: the scenario from the sidebar, then saved on the Scenarios page.
        one = browser.new_context(viewport={"width": 1400, "height": 1400}).new_page()
        one.goto(a)
        settled(one)
        for label, option in (("GPU", "h200-sxm"), ("Model", "llama-3.1-70b"), ("Weights", "fp8"), ("TP", "2"),
                              ("Serving mode", "disaggregated")):
            choose(one, label, option)
        set_number(one, "Requests/s", 50)
        expect(one.locator("[data-testid='stCaptionContainer']").filter(has_text="llama-3.1-70b on h200-sxm").first).to_be_visible()
        numbers = _plan_numbers(one)
        nav(one, "Scenarios")
        one.get_by_label("Name", exact=True).fill(NAME)
        one.get_by_label("Name", exact=True).press("Enter")  # a text input commits on Enter
        settled(one)
        one.get_by_role("button", name="Save").click()
        settled(one)
        expect(one.get_by_text(f"Saved '{NAME}'")).to_be_visible()

        # Person 2 on server B opens it by its link: the same scenario, the same numbers.
        two = browser.new_context(viewport={"width": 1400, "height": 1400}).new_page()
        two.goto(f"{b}/?scenario={SLUG}")
        settled(two)
        expect(two.locator("[data-testid='stCaptionContainer']").filter(has_text="llama-3.1-70b on h200-sxm").first).to_be_visible()
        expect_number(two, "Requests/s", 50)
        expect(two.locator("[data-testid='stMain'] [data-testid='stMetricValue']")).to_have_text(numbers)

        # Both change it, each from the version they loaded, each through their server's own engine.
        ea, eb = make_engine(pg_url), make_engine(pg_url)
        try:
            loaded_a, loaded_b = get_scenario(engine=ea, ref=SLUG), get_scenario(engine=eb, ref=SLUG)
            assert loaded_a.version == loaded_b.version == 1

            def changed(loaded, rps: float):
                data = loaded.scenario.model_dump(mode="json")
                data["workload"]["requests_per_s"] = rps
                return scenario_from_dict(data)

            update_scenario(engine=ea, ref=SLUG, expected_version=1, scenario=changed(loaded_a, 60.0))
            with pytest.raises(ConflictError) as conflict:
                update_scenario(engine=eb, ref=SLUG, expected_version=1, scenario=changed(loaded_b, 70.0))
            message = str(conflict.value)
            assert "changed since you loaded it" in message and "version 2" in message
            assert "nothing was saved" in message and "\n" not in message
            assert [r.version for r in list_revisions(engine=eb, ref=SLUG)] == [2, 1]
            # Person 2 reloads and applies the change again: a third revision, the second kept.
            reloaded = get_scenario(engine=eb, ref=SLUG)
            assert reloaded.version == 2 and reloaded.scenario.workload.requests_per_s == 60.0
            update_scenario(engine=eb, ref=SLUG, expected_version=2, scenario=changed(reloaded, 70.0))
            revs = list_revisions(engine=ea, ref=SLUG)
            assert [r.version for r in revs] == [3, 2, 1]
            rates = {r.version: scenario_from_dict(r.payload).workload.requests_per_s for r in revs}
            assert rates == {1: 50.0, 2: 60.0, 3: 70.0}
        finally:
            ea.dispose()
            eb.dispose()

        # Both servers now open the newest revision by the same link.
        for server, page in ((a, one), (b, two)):
            page.goto(f"{server}/?scenario={SLUG}")
            settled(page)
            expect_number(page, "Requests/s", 70)
            assert page.locator("[data-testid='stException']").count() == 0
        browser.close()
