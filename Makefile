# gpupool.vcf: every set-up step lives here, so a fresh machine needs only `make test` or `make demo`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
SIM_DIR := .sim
COLL_ROOT := .build/collections
COLL_DIR := $(COLL_ROOT)/ansible_collections/gpupool/vcf
# ansible-core and ansible-test of the development pin, for ansible-test sanity (`make sanity`)
SANITY_VENV := .build/sanity-venv
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/$(COLL_ROOT)
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/$(SIM_DIR)/bin:$(PATH)

.PHONY: help venv collection test unit check integration sanity lint demo bench clean sim-build sim-up sim-down molecule browser dist \
  importer importer-venv docs docs-venv docs-lint changelog-lint matrix matrix-venv

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

# ansible-lint with an Ansible home of its own: ansible-lint puts the home's collections (~/.ansible by
# default) ahead of ANSIBLE_COLLECTIONS_PATH, so a copy of gpupool.vcf installed there for a user would be
# linted against instead of the checkout
LINT := mkdir -p .build/lint-home && ANSIBLE_HOME=$(CURDIR)/.build/lint-home $(VENV)/bin/ansible-lint --offline

# everyday work, in under two minutes: the unit tests in one process (with the pep8/pyflakes-style
# pass of tests/unit/test_code_style.py) and, beside them on the second core, ansible-lint and then
# ansible-test's pep8 (the sanity test as CI runs it, seconds); no simulator and no other sanity test
# (`make sanity`, minutes). Prints each result and the wall time.
check: venv collection $(SANITY_VENV)/.stamp
	@start=$$(date +%s); lint_log=$$(mktemp); pep8_log=$$(mktemp); \
	  { $(LINT) >$$lint_log 2>&1; echo $$? >$$lint_log.rc; \
	    $(SANITY_VENV)/bin/python tests/tools/seed_ansible_test_cache.py >/dev/null && \
	    tests/tools/sanity.sh $(CURDIR)/$(SANITY_VENV)/bin/ansible-test --test pep8 >$$pep8_log 2>&1; } & side=$$!; \
	  $(PY) -m pytest -q tests/unit; unit_rc=$$?; \
	  wait $$side; pep8_rc=$$?; lint_rc=$$(cat $$lint_log.rc); cat $$lint_log $$pep8_log; \
	  rm -f $$lint_log $$lint_log.rc $$pep8_log; \
	  echo "check: unit tests rc=$$unit_rc, ansible-lint rc=$$lint_rc, pep8 rc=$$pep8_rc, $$(( $$(date +%s) - start )) s"; \
	  [ $$unit_rc -eq 0 ] && [ $$lint_rc -eq 0 ] && [ $$pep8_rc -eq 0 ]

integration: venv collection sim-build browser
	$(PY) -m pytest $(PYTEST_ARGS) tests/integration

# every stage prints its seconds and the run ends with the seconds of each (tests/tools/stage.sh);
# the set-up stage is what a fresh clone builds (venvs, simulators, Chromium) and nearly nothing after
STAGE_LOG := .build/test-stages.log
STAGE = tests/tools/stage.sh $(STAGE_LOG)
test:
	@mkdir -p .build && rm -f $(STAGE_LOG)
	@$(STAGE) set-up $(MAKE) --no-print-directory venv collection sim-build browser importer-venv docs-venv \
	  $(SANITY_VENV)/.stamp matrix-venv
	@$(STAGE) pytest $(PY) -m pytest $(PYTEST_ARGS) tests/unit tests/integration
	@$(STAGE) molecule $(MAKE) --no-print-directory molecule
	@$(STAGE) sanity $(MAKE) --no-print-directory sanity
	@$(STAGE) lint $(MAKE) --no-print-directory lint
	@$(STAGE) docs-lint $(MAKE) --no-print-directory docs-lint
	@$(STAGE) changelog-lint $(MAKE) --no-print-directory changelog-lint
	@$(STAGE) matrix $(MAKE) --no-print-directory matrix
	@$(STAGE) --summary

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

# The ansible-core matrix. The newest ansible-core that installs on Python 3.11 is 2.19 (2.20 and 2.21
# need Python 3.12 on the controller): it is the development pin of requirements-dev.txt, so .venv and
# $(SANITY_VENV) run the unit, integration and sanity tests on it. Each older version of MATRIX_VERSIONS
# (the oldest is requires_ansible of meta/runtime.yml) has a venv of its own, the version in its name,
# made once like the sanity venv: that ansible-core, the `ansible` package of its line (the collections
# the tests use: kubernetes.core, awx.awx, ansible.posix) and the test tools of requirements-dev.txt
# that bring no ansible-core of their own (molecule and ansible-lint stay in .venv). `make matrix`
# (run by `make test`) runs the unit tests and ansible-test sanity on each, side by side on the two
# cores (tests/tools/matrix.sh), and prints each version's wall time. The integration tests stay on .venv.
MATRIX_VERSIONS ?= 2.16
# the `ansible` package that ships each ansible-core line, and the Python of a line that needs another
# than $(PYTHON): 2.20 and later need 3.12 on the controller, which Debian bookworm does not have;
# where python3.12 is installed, `make matrix MATRIX_VERSIONS="2.16 2.21"` adds 2.21
ANSIBLE_PACKAGE_2.16 := 9
ANSIBLE_PACKAGE_2.21 := 14
PYTHON_2.21 := python3.12
matrix_venv = .build/ansible-core-$(1)-venv
MATRIX_STAMPS := $(foreach v,$(MATRIX_VERSIONS),$(call matrix_venv,$(v))/.stamp)
matrix-venv: $(MATRIX_STAMPS)
.build/ansible-core-%-venv/.stamp: requirements.txt requirements-dev.txt
	@[ -n "$(ANSIBLE_PACKAGE_$*)" ] || { echo "matrix: no ANSIBLE_PACKAGE_$* in the Makefile" >&2; exit 1; }
	rm -rf $(@D)
	$(if $(PYTHON_$*),$(PYTHON_$*) -m venv $(@D),$(PYTHON) -m venv $(@D) || python3 -m venv $(@D))
	$(@D)/bin/python -m pip install -q --upgrade pip
	grep -vE '^(-r|(ansible-core|ansible|molecule|ansible-lint)([<>=~!]|$$))' requirements-dev.txt >$(@D)/requirements-tests.txt
	$(@D)/bin/python -m pip install -q -r requirements.txt -r $(@D)/requirements-tests.txt \
	  "ansible-core==$*.*" "ansible==$(ANSIBLE_PACKAGE_$*).*"
	touch $@

matrix: collection $(MATRIX_STAMPS)
	@for v in $(MATRIX_VERSIONS); do tests/tools/matrix.sh $(CURDIR)/$(call matrix_venv,$$v) || exit 1; done

lint: venv collection
	$(LINT)

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
