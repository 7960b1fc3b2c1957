"""Ridgeline: LLM-serving capacity and cost reviews."""

import streamlit as st

from pages._nav import app_pages
from pages._sidebar import frame

# The shared scenario is drawn here, before the page, so every page shows the
# same sidebar widgets and a page switch keeps them.
frame()
st.navigation(app_pages()).run()
