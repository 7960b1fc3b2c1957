# Ridgeline: `make run` starts the app, `make test` runs every test.
# Both create the virtual environment in .venv/ first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
PORT ?= 8501
RUFF_FLAGS := --line-length 120 --select E,F,W,I,B,UP --ignore E501,B008 --target-version py311

.PHONY: setup run migrate warm test lint typecheck pytest clean

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# Upgrade the store to the newest Alembic revision: DATABASE_URL, else the
# SQLite file RIDGELINE_DB (default ridgeline.db here).  Called as a function: `-m planner.store.migrate`
# runs a module its package has already imported, which Python warns about.
migrate: setup
	$(PY) -c 'import sys; from planner.store.migrate import main; sys.exit(main(["upgrade"]))'

# Compile the simulator's kernel (planner/simulate/kernel.py, numba) once: it is cached beside
# the module, so later starts load it in a fraction of a second and no page waits for the compiler.
warm: setup
	$(PY) -c 'from planner.simulate.kernel import warm; warm()'

run: setup migrate warm
	$(VENV)/bin/streamlit run app.py --server.headless=true --server.port=$(PORT) \
		--browser.gatherUsageStats=false --client.toolbarMode=minimal

lint: setup
	$(VENV)/bin/ruff check $(RUFF_FLAGS) planner pages tests bench app.py
	$(VENV)/bin/lint-imports

typecheck: setup
	$(VENV)/bin/mypy --strict --ignore-missing-imports planner

pytest: setup
	$(PY) -m pytest -q -p no:cacheprovider tests

test: lint typecheck pytest

clean:
	rm -rf $(VENV)
