"""Ridgeline: LLM-serving capacity and cost reviews."""

import streamlit as st

from pages._format import plain
from pages._nav import app_pages
from pages._sidebar import frame
from planner import PlannerError

# A team server: an uncaught exception shows visitors a generic message only; its type,
# text (which can quote SQL or a database URL) and traceback go to the server log.
# .streamlit/config.toml sets the same for `streamlit run` from the repository root;
# this line holds it for any other start (another working directory, AppTest).
SHOW_ERROR_DETAILS = "none"
NAVIGATION_READY = "_navigation_ready"
st.set_option("client.showErrorDetails", SHOW_ERROR_DETAILS)

# Every page link stays in view: Streamlit folds a sidebar nav of more than 10 pages
# behind "View more" unless it is expanded.
page = st.navigation(app_pages(), expanded=True)
if not st.session_state.get(NAVIGATION_READY):
    # Once per session, before any widget exists: a fresh server's first run may have
    # started in Streamlit's pages/-folder mode (its sidebar links then drop the URL's
    # scenario), and a session's first run knows no page yet while Streamlit folds the
    # page into every widget's identity (the visitor's first change would be lost).
    # Declaring the navigation above settled both; one rerun starts clean.
    st.session_state[NAVIGATION_READY] = True
    st.rerun()
# The shared scenario is drawn here, before the page, so every page shows the
# same sidebar widgets and a page switch keeps them.
frame()
try:
    page.run()
except PlannerError as exc:
    st.error(plain(str(exc)))
