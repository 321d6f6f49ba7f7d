# GPU-hour budget governance — the commands a newcomer needs.
# `make run` and `make test` work on a fresh clone with nothing done by hand first.

# The interpreter the virtualenv is made from: the operating system's own Python when it is
# 3.11 or newer and can make a virtualenv and compile extensions (the native engine needs
# Python.h), else python3 on PATH; PYTHON=... picks another. Debian's is built with
# profile-guided and link-time optimization and links libpython statically; a pyenv build
# without --enable-optimizations does neither: the whole Philly replay took 10.3-10.7 s on
# the first and 12.5-12.8 s on the second, alternated on one machine (docs/benchmarks.md).
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in /usr/bin/python3 python3; do "$$p" -c 'import ensurepip, os, sys, sysconfig, venv; sys.exit(sys.version_info < (3, 11) or not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' >/dev/null 2>&1 && echo "$$p" && exit; done; echo python3)
endif
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/governance
TEST_BROKER_URL ?= redis://127.0.0.1:6379/0
BENCH ?= tests/bench

.PHONY: install native run test lint format bench demo clean fuzz load faults flake-hunt plotly-bundle

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The engine and the replay loop compiled with mypyc into var/native: same source, same
# decisions, about twice as fast; then compiled again guided by a profile of a replay
# (docs/design.md). Rebuilt when a compiled source changed (a quick check otherwise); a failed
# build is reported and the engine runs as plain Python.
install: $(VENV)/.installed
	@$(PY) -m scheduler.native_build --profile

native: $(VENV)/.installed
	$(PY) -m scheduler.native_build --force --profile

# This checkout's own settings (development mode, a generated secret key), so every manage.py
# command of the README works here as printed. Never copied to a server: var/ is not tracked.
var/local.env:
	@mkdir -p var
	@umask 077 && $(PYTHON) -c 'import secrets; print("# Written by make run: this checkout is a development machine; a server sets its own environment.\nDEBUG=true\nSECRET_KEY=" + secrets.token_urlsafe(50))' > $@

# The native build runs beside the migrations and the demo data (two processes on two cores,
# about 30 s sooner to the first page on a fresh clone); the server starts once both are done,
# so it runs the native engine. The demo's replay may run as plain Python: same decisions.
run: $(VENV)/.installed var/local.env
	@mkdir -p var
	@$(PY) -m scheduler.native_build & build=$$!; \
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput \
	&& DEBUG=$${DEBUG:-true} $(PY) manage.py load_demo --history-days 28; \
	status=$$?; wait $$build; exit $$status
	DEBUG=$${DEBUG:-true} $(PY) manage.py serve --host $(HOST) --port $(PORT)

test: install
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	REQUIRE_SERVICES=1 $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The API fuzzer in full: every operation x every principal, 100 examples per operation and
# mode (make test runs the same tests with 12). FUZZ_EXAMPLES=<n> to change it.
fuzz: install
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-100} \
	$(PY) -m pytest tests/reliability/test_fuzz_api.py -p no:cacheprovider -q $(PYTEST_ARGS)

bench: install
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} \
	$(PY) -m pytest $(BENCH) -p no:cacheprovider -o addopts="" -q $(PYTEST_ARGS)

# Load and faults during load (docs/reliability.md): a PostgreSQL cluster (port 5440) and a
# Redis (6390) of their own, gunicorn, Celery worker + beat, agents, locust. DURATION=<seconds>
# (load 120, faults 240); LOAD_USERS=<clients> (30). Never touches the shared 5432/6379.
load: install
	$(PY) -m tests.reliability_load.harness $(if $(DURATION),--duration $(DURATION))

faults: install
	$(PY) -m tests.reliability_load.harness --faults $(if $(DURATION),--duration $(DURATION))

# Repeat the suite to find flaky tests (docs/reliability.md, "Flaky tests"): RUNS fresh clones
# of HEAD running .ci/run (default 5), or PART=fragile: browser and fault tests (default 10).
flake-hunt:
	RUNS=$(RUNS) PART=$(PART) bash tests/flake_hunt.sh

clean:
	rm -rf $(VENV) var/db.sqlite3 var/staticfiles var/native

# The browser's Plotly: only the traces our figures draw (scatter, bar, sunburst, heatmap), a quarter of
# the full bundle, so a page with charts is drawn in about half a second on a first visit.
# Rebuild it (needs npm) when the plotly Python package moves to another plotly.js version;
# tests/governance/test_plotly_bundle.py says when. The result is committed under static/.
PLOTLY_JS_VERSION ?= $(shell $(PY) -c "from plotly.offline import get_plotlyjs_version as v; print(v())")
plotly-bundle: install
	rm -rf var/plotly-bundle && mkdir -p var/plotly-bundle
	cd var/plotly-bundle && npm init -y >/dev/null && \
	  npm install --silent --no-audit --no-fund plotly.js@$(PLOTLY_JS_VERSION) esbuild@0.28.2 && \
	  printf "%s\n" "var Plotly = require('plotly.js/lib/core');" \
	    "Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/sunburst'), require('plotly.js/lib/heatmap')]);" \
	    "module.exports = Plotly;" > entry.js && \
	  npx esbuild entry.js --bundle --minify --format=iife --global-name=Plotly \
	    --define:global=window --log-level=warning \
	    --banner:js="/*! plotly.js v$(PLOTLY_JS_VERSION) (MIT, see LICENSE): scatter, bar, sunburst and heatmap only; built by make plotly-bundle */" \
	    --outfile=../../static/vendor/plotly/plotly-governance.min.js
	rm -f static/vendor/plotly/plotly-governance.min.css  # map styles: we draw no maps
	cp var/plotly-bundle/node_modules/plotly.js/LICENSE static/vendor/plotly/LICENSE
