"""AppTest for an ``st.navigation`` app that also has a ``pages/`` folder.

AppTest resets ``PagesManager.uses_pages_directory`` before every run, so with a
``pages/`` folder beside ``app.py`` every rerun after the first is treated as a
v1 multipage app and runs the page script alone, skipping ``app.py`` (and the
sidebar it draws).  ``streamlit run`` decides once, from ``st.navigation``.
``new_app_test`` pins the v2 behaviour so AppTest runs what the server runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit.testing.v1.app_test as _app_test
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "app.py"


class _V2PagesManager(PagesManager):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        PagesManager.uses_pages_directory = False
        super().__init__(*args, **kwargs)


def new_app_test(*, timeout: float = 60) -> AppTest:
    """An AppTest of app.py that reruns the entrypoint like the server does."""
    _app_test.PagesManager = _V2PagesManager  # type: ignore[misc]
    return AppTest.from_file(str(APP), default_timeout=timeout)
