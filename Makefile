# tinyprof: `make book` builds the course site, `make test` runs every test, `make test-fast`
# the tests that start no kernel (the loop for working on the library).
# Needs python3 (3.10+), git and make; everything else goes into .venv. With npm, setup also
# installs the book's pinned browser files (book/package.json: MathJax, which the site serves
# itself, and axe-core, which the browser test runs) into book/node_modules.

VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NODE_STAMP := book/node_modules/.installed
# nbgrader shells out to tools in the venv (alembic), and Jupyter finds its kernel there.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: setup book test test-fast release lint clean

# pip shows a local project's build warnings, and setuptools adds an informational "Editable
# installation." notice to every editable install of a package that sits next to pyproject.toml
# (it warns that such a folder shadows the install; here that folder is the install). Only that
# notice is filtered: any other warning from the build still shows.
QUIET_NOTICE := PYTHONWARNINGS="ignore:Editable installation"

setup: $(STAMP) $(NODE_STAMP)

$(STAMP): requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(QUIET_NOTICE) $(PYTHON) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

$(NODE_STAMP): book/package.json book/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix book --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); \
	else \
	  echo "npm not found: the book loads MathJax from a CDN and the accessibility test skips"; \
	fi

# The book is built whatever the course's home; `autograder home` then warns (without failing
# the build) if the launch buttons and links still send students to the repository of solutions.
book: setup
	$(VENV)/bin/jupyter-book build . --builder html
	@$(PYTHON) -m autograder home

test: setup
	$(PYTHON) -m pytest

# The tests of tests/ that carry none of the heavy markers (tests/tiers.py): no kernel, no
# notebook run, no sandbox, cohort, book or browser. TINYPROF_TEST_TIER=fast turns on the guard
# that fails any test starting one of those unmarked. Prints its wall time.
test-fast: setup
	@start=$$(date +%s); \
	TINYPROF_TEST_TIER=fast $(PYTHON) -m pytest tests \
	  -m "not (kernel or sandbox or cohort or book or browser or slow)"; \
	status=$$?; echo "make test-fast: $$(($$(date +%s) - start)) s wall"; exit $$status

release: setup
	$(PYTHON) -m autograder release

lint: setup
	$(VENV)/bin/ruff check tinyprof autograder tests benchmarks

clean:
	rm -rf _build .pytest_cache
