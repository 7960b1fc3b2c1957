"""AppTest of ``app.py`` that decides Streamlit's ``pages/``-folder mode as a server does.

A server decides once per process: the first ``st.navigation`` call ends the
older folder mode for good (a first visitor on a page URL is sent through
``app.py`` by ``pages/_sidebar.through_app_py``).  AppTest instead resets that
decision before every run, so every rerun after a widget change would start in
folder mode and take the fallback path.  ``new_app_test`` keeps the server's
once-per-process decision; the browser test covers the fallback on a fresh server.

Why a shim, checked with streamlit 1.67.0 (requirements.txt: >=1.50,<2): AppTest has
no supported switch for it.  ``AppTest._run`` sets ``PagesManager.uses_pages_directory
= None`` before every run (streamlit/testing/v1/app_test.py), and a new PagesManager
then sets it True because ``pages/`` exists beside app.py, so the script runner takes
``_mpa_v1`` (folder mode) and ``through_app_py``'s fallback (st.navigation + st.rerun)
runs on every AppTest run.  Without the shim, plain rendering and widget changes still
pass, but an action that requests a rerun itself is lost: in
tests/test_app.py::test_explore_page_loads_a_candidate_as_the_current_scenario the
Explore page's "Load" leaves the sidebar's GPU at h100-sxm instead of h200-sxm.
Remove the shim when AppTest stops resetting the flag (or offers a v2-only mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit.testing.v1.app_test as _app_test
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "app.py"


class _ServerPagesManager(PagesManager):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        PagesManager.uses_pages_directory = False  # app.py calls st.navigation on every run
        super().__init__(*args, **kwargs)


def new_app_test(*, timeout: float = 60) -> AppTest:
    """An AppTest of app.py that reruns the entrypoint like the server does."""
    _app_test.PagesManager = _ServerPagesManager  # type: ignore[misc]
    return AppTest.from_file(str(APP), default_timeout=timeout)


def use_migrated_sqlite(tmp_path: Path, monkeypatch: Any) -> Path:
    """Point the app at a fresh SQLite file under ``tmp_path`` (never DATABASE_URL), upgraded to head."""
    from planner.store.migrate import upgrade

    db = tmp_path / "ridgeline.db"
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("RIDGELINE_DB", str(db))
    upgrade(f"sqlite:///{db}")
    return db
