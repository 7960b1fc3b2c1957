"""The app's page list, shared by ``app.py`` and the pages' own-URL fallback."""

from __future__ import annotations

import streamlit as st
from streamlit.navigation.page import StreamlitPage

VIA_APP = "_via_app"  # set by app.py on every run, taken by the page that run shows


def _plan_alias() -> None:
    """``/plan``: the Plan page's own name in a link.  The default page is served at ``/``
    (Streamlit gives it no path of its own), so this hidden page sends a visitor there."""
    st.switch_page("pages/plan.py")


def app_pages() -> dict[str, list[StreamlitPage]]:
    """Every page, grouped as the sidebar shows them."""
    return {
        "Review": [
            # The default page is served at "/" whatever its url_path; "plan" goes to the alias below.
            st.Page("pages/plan.py", title="Plan", url_path="home", default=True),
            st.Page(_plan_alias, title="Plan", url_path="plan", visibility="hidden"),
            st.Page("pages/roofline.py", title="Roofline", url_path="roofline"),
            st.Page("pages/memory.py", title="Memory & KV", url_path="memory"),
            st.Page("pages/latency.py", title="Latency & throughput", url_path="latency"),
            st.Page("pages/parallelism.py", title="Parallelism", url_path="parallelism"),
            st.Page("pages/fleet.py", title="Fleet & cost", url_path="fleet"),
            st.Page("pages/tail.py", title="Tail latency", url_path="tail"),
            st.Page("pages/autoscale.py", title="Autoscaling", url_path="autoscale"),
        ],
        "Decide": [
            st.Page("pages/compare.py", title="Compare", url_path="compare"),
            st.Page("pages/explore.py", title="Explore", url_path="explore"),
            st.Page("pages/scenarios.py", title="Scenarios", url_path="scenarios"),
        ],
        "Measure": [
            st.Page("pages/probe.py", title="Live probe", url_path="probe"),
            st.Page("pages/calibrate.py", title="Calibrate", url_path="calibrate"),
        ],
        "Reference": [
            st.Page("pages/catalog.py", title="Catalog", url_path="catalog"),
        ],
    }
