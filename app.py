"""Ridgeline: LLM-serving capacity and cost reviews."""

import streamlit as st

from pages._sidebar import SCENARIO_KEY, sidebar_scenario
from planner.errors import PlannerError

# A team server: an uncaught exception shows visitors a generic message only; its type,
# text (which can quote SQL or a database URL) and traceback go to the server log.
# .streamlit/config.toml sets the same for `streamlit run` from the repository root;
# this line holds it for any other start (another working directory, AppTest).
SHOW_ERROR_DETAILS = "none"
st.set_option("client.showErrorDetails", SHOW_ERROR_DETAILS)
st.set_page_config(page_title="Ridgeline", layout="wide")

pages = {
    "Review": [
        st.Page("pages/plan.py", title="Plan", url_path="plan", default=True),
        st.Page("pages/roofline.py", title="Roofline", url_path="roofline"),
        st.Page("pages/memory.py", title="Memory & KV", url_path="memory"),
        st.Page("pages/latency.py", title="Latency & throughput", url_path="latency"),
        st.Page("pages/parallelism.py", title="Parallelism", url_path="parallelism"),
        st.Page("pages/fleet.py", title="Fleet & cost", url_path="fleet"),
        st.Page("pages/tail.py", title="Tail latency", url_path="tail"),
    ],
    "Decide": [
        st.Page("pages/explore.py", title="Explore", url_path="explore"),
        st.Page("pages/scenarios.py", title="Scenarios", url_path="scenarios"),
    ],
    "Measure": [
        st.Page("pages/probe.py", title="Live probe", url_path="probe"),
    ],
    "Reference": [
        st.Page("pages/catalog.py", title="Catalog", url_path="catalog"),
    ],
}
# The shared scenario is drawn here, before the page, so every page shows the
# same sidebar widgets and a page switch keeps them.  Whatever the core raises
# (PlannerError: a bad input, an unusable store) is one message, on any page.
try:
    st.session_state[SCENARIO_KEY] = sidebar_scenario()
except PlannerError as exc:
    st.session_state[SCENARIO_KEY] = None
    st.error(str(exc))
try:
    st.navigation(pages).run()
except PlannerError as exc:
    st.error(str(exc))
