# gpupool.vcf: every set-up step lives here, so a fresh machine needs only `make test` or `make demo`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
SIM_DIR := .sim
COLL_ROOT := .build/collections
COLL_DIR := $(COLL_ROOT)/ansible_collections/gpupool/vcf
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/$(COLL_ROOT)
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/$(SIM_DIR)/bin:$(PATH)

.PHONY: help venv collection test unit check integration sanity lint demo bench clean sim-build sim-up sim-down molecule browser dist \
  importer importer-venv docs docs-venv docs-lint changelog-lint

help:
	@echo "make test   - create the venv, build the simulators, run every test"
	@echo "make demo   - converge the example design against the simulators, then show nothing is left to change"
	@echo "make bench  - print wall time and request counts of the modules at fleet scale"

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

# ansible and ansible-test find the collection as ansible_collections/gpupool/vcf
collection: $(COLL_DIR)
$(COLL_DIR):
	mkdir -p $(dir $(COLL_DIR))
	ln -sfn $(CURDIR) $(COLL_DIR)

sim-build:

# each simulator brings its own rules (build, up, down) in tests/sim/<name>/<name>.mk
-include $(wildcard tests/sim/*/*.mk)

# pytest-xdist workers for integration and test (TEST_WORKERS=0: one process, tests in file
# order). A test file runs on one worker, the longest first (tests/conftest.py); every worker
# starts its own simulators on free ports and in folders of its own.
# The unit tests alone take seconds, less than starting workers: `make unit` runs them in one
# process unless TEST_WORKERS is given.
TEST_WORKERS ?= 2
PYTEST_ARGS := -q $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

unit: venv collection
	$(PY) -m pytest $(if $(filter command line environment,$(origin TEST_WORKERS)),$(PYTEST_ARGS),-q) tests/unit

# everyday work, in under two minutes: the unit tests in one process (with the pep8/pyflakes-style
# pass of tests/unit/test_code_style.py) and, beside them on the second core, ansible-lint; no
# simulator and no ansible-test sanity (`make sanity`, minutes). Prints each result and the wall time.
check: venv collection
	@start=$$(date +%s); lint_log=$$(mktemp); \
	  $(VENV)/bin/ansible-lint --offline >$$lint_log 2>&1 & lint=$$!; \
	  $(PY) -m pytest -q tests/unit; unit_rc=$$?; \
	  wait $$lint; lint_rc=$$?; cat $$lint_log; rm -f $$lint_log; \
	  echo "check: unit tests rc=$$unit_rc, ansible-lint rc=$$lint_rc, $$(( $$(date +%s) - start )) s"; \
	  [ $$unit_rc -eq 0 ] && [ $$lint_rc -eq 0 ]

integration: venv collection sim-build browser
	$(PY) -m pytest $(PYTEST_ARGS) tests/integration

test: venv collection sim-build browser importer-venv docs-venv
	$(PY) -m pytest $(PYTEST_ARGS) tests/unit tests/integration
	$(MAKE) --no-print-directory molecule sanity lint docs-lint changelog-lint

# site.yml through molecule (converge, idempotence, verify) against simulators started here
# (vSphere; the Kubernetes rig as Supervisor and guest cluster, with the platform's VKS cluster;
# the DLS double: tests/lib/chain.py, whose site.yml variables molecule reads from .sim/chain-vars.json)
molecule: venv collection sim-build
	$(MAKE) --no-print-directory sim-up FLEET=examples/fleet.yml
	$(PY) tests/lib/chain.py up || { $(PY) tests/lib/chain.py down; $(MAKE) --no-print-directory sim-down; exit 1; }
	set -a && . $(SIM_DIR)/vsphere.env && set +a && GPUPOOL_CHAIN_VARS=$(CURDIR)/$(SIM_DIR)/chain-vars.json \
	  $(VENV)/bin/molecule test -s default; rc=$$?; \
	  $(PY) tests/lib/chain.py down; $(MAKE) --no-print-directory sim-down; exit $$rc

# headless Chromium for the tests that open the HTML reports (tests/lib/browser.py): Debian's
# chromium and chromium-driver, installed once (as root, or through sudo); nothing to do when both
# are there. The package lists are refreshed only when the install cannot find the packages.
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get
browser:
	@if [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ]; then exit 0; fi; \
	  echo "browser: installing Debian's chromium and chromium-driver for the report tests"; \
	  $(APT_GET) install -y -q --no-install-recommends chromium chromium-driver \
	    || { $(APT_GET) update -q && $(APT_GET) install -y -q --no-install-recommends chromium chromium-driver; } \
	    || { echo "browser: could not install chromium and chromium-driver with apt-get" >&2; exit 1; }

# ansible-test wants a real ansible_collections/<ns>/<name> tree: tests/tools/sanity.sh copies one
SANITY_VENV := .build/sanity-venv
sanity: $(SANITY_VENV)/.stamp
	$(SANITY_VENV)/bin/python tests/tools/seed_ansible_test_cache.py
	tests/tools/sanity.sh $(CURDIR)/$(SANITY_VENV)/bin/ansible-test $(SANITY_ARGS)

# ansible-test installs its pinned linters (pylint, pycodestyle, ...) with --requirements: a venv of
# their own, so they do not clash with ansible-lint's in .venv
$(SANITY_VENV)/.stamp: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(SANITY_VENV) || python3 -m venv $(SANITY_VENV)
	$(SANITY_VENV)/bin/python -m pip install -q -r requirements.txt \
	  "$$(grep -E '^ansible-core' requirements-dev.txt)"
	touch $@

lint: venv collection
	$(VENV)/bin/ansible-lint --offline

# every benchmark under tests/bench prints its own figures
bench: venv collection sim-build
	set -e; for b in tests/bench/bench_*.py; do echo "== $$b"; $(PY) $$b; done

# the main job: the example design converged end to end against the simulators, run again
# showing nothing left to change, audited, drifted, audited and repaired (tests/tools/demo.py)
demo: venv collection sim-build
	$(PY) tests/tools/demo.py

# the collection as users install it: the tarball `ansible-galaxy collection install` takes, in
# .build/dist (tests/integration/test_dist_artifact.py installs one and uses it from there)
dist: venv
	$(VENV)/bin/ansible-galaxy collection build --force --output-path .build/dist .

# Galaxy's importer (galaxy-importer, what galaxy.ansible.com and Automation Hub run on an upload) in a
# venv of its own: it brings its own ansible-core and ansible-lint, which must not clash with .venv's
# pins. The version is in the stamp's name, so a new pin makes a new venv. `make importer` runs it on a
# freshly built tarball (tests/integration/test_dist_artifact.py, offline, without a container engine).
IMPORTER_VENV := .build/importer-venv
GALAXY_IMPORTER_VERSION := 0.4.44
importer-venv: $(IMPORTER_VENV)/.stamp-$(GALAXY_IMPORTER_VERSION)
$(IMPORTER_VENV)/.stamp-$(GALAXY_IMPORTER_VERSION):
	rm -rf $(IMPORTER_VENV)
	$(PYTHON) -m venv $(IMPORTER_VENV) || python3 -m venv $(IMPORTER_VENV)
	$(IMPORTER_VENV)/bin/python -m pip install -q "galaxy-importer==$(GALAXY_IMPORTER_VERSION)"
	touch $@

importer: venv collection importer-venv
	$(PY) -m pytest -q tests/integration/test_dist_artifact.py -k galaxy_importer

# the documentation site: antsibull-docs writes a page per module, filter and role from the collection
# (the checkout, through .build/collections; kubernetes.core and the other collections from .venv), the
# guides of docs/ and the examples they link to beside it, Sphinx builds the HTML in .build/docs/html
# (warnings are errors). Its tools are in a venv of their own (docs/site/requirements.txt).
DOCS_VENV := .build/docs-venv
DOCS_SRC := .build/docs/rst
DOCS_ENV = PATH=$(CURDIR)/$(DOCS_VENV)/bin:$$PATH \
  ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/$(COLL_ROOT):$$($(PY) -c 'import ansible, os; print(os.path.dirname(os.path.dirname(ansible.__file__)))')
docs-venv: $(DOCS_VENV)/.stamp
$(DOCS_VENV)/.stamp: docs/site/requirements.txt requirements-dev.txt
	rm -rf $(DOCS_VENV)
	$(PYTHON) -m venv $(DOCS_VENV) || python3 -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q -r docs/site/requirements.txt "$$(grep -E '^ansible-core' requirements-dev.txt)"
	touch $@

docs: venv collection docs-venv
	rm -rf .build/docs && mkdir -p -m 700 $(DOCS_SRC)/collection
	$(DOCS_ENV) antsibull-docs --config-file docs/site/antsibull-docs.cfg collection --use-current --squash-hierarchy \
	  --fail-on-error --dest-dir $(DOCS_SRC)/collection gpupool.vcf
	mkdir -p $(DOCS_SRC)/guides && cp docs/*.md $(DOCS_SRC)/guides/ && cp -r examples $(DOCS_SRC)/examples
	cp docs/site/index.rst docs/site/ansible-docs.rst $(DOCS_SRC)/
	$(DOCS_ENV) sphinx-build -q -b html -c docs/site -W --keep-going $(DOCS_SRC) .build/docs/html
	@echo "docs: .build/docs/html/index.html"

# the plugins' and roles' documentation as antsibull-docs judges it (markup, references, schema)
docs-lint: venv collection docs-venv
	$(DOCS_ENV) antsibull-docs lint-collection-docs --plugin-docs .

# the changelog fragments and changelogs/changelog.yaml as `antsibull-changelog release` reads them
# (docs/releasing.md)
changelog-lint: venv
	$(VENV)/bin/antsibull-changelog lint
	$(VENV)/bin/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml

clean:
	rm -rf .build $(SIM_DIR) .pytest_cache
