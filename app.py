"""Ridgeline: LLM-serving capacity and cost reviews."""

import streamlit as st

from pages._format import plain
from pages._nav import app_pages
from pages._sidebar import first_run_of_session, frame
from planner import PlannerError

# A team server: an uncaught exception shows visitors a generic message only; its type,
# text (which can quote SQL or a database URL) and traceback go to the server log.
# .streamlit/config.toml sets the same for `streamlit run` from the repository root;
# this line holds it for any other start (another working directory, AppTest).
SHOW_ERROR_DETAILS = "none"
st.set_option("client.showErrorDetails", SHOW_ERROR_DETAILS)

# The shared scenario is drawn here, before the page, so every page shows the
# same sidebar widgets and a page switch keeps them.
frame()
try:
    page = st.navigation(app_pages())
    if first_run_of_session():
        # A session's first run knows no page yet, and Streamlit folds the page into every
        # widget's identity: rerun once on the page, so the first change a visitor makes
        # is made on the widgets of every later run (else it is silently lost).
        st.rerun()
    page.run()
except PlannerError as exc:
    st.error(plain(str(exc)))
