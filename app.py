"""Ridgeline: LLM-serving capacity and cost reviews."""

import streamlit as st

st.set_page_config(page_title="Ridgeline", layout="wide")

pages = {
    "Review": [
        st.Page("pages/plan.py", title="Plan", url_path="plan", default=True),
    ],
}
st.navigation(pages).run()
