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

.PHONY: help venv collection test unit integration sanity lint demo bench clean sim-build

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

# each simulator brings its own rules (build, up, down) in tests/sim/<name>/<name>.mk
-include $(wildcard tests/sim/*/*.mk)

unit: venv collection
	$(PY) -m pytest -q tests/unit

integration: venv collection sim-build
	$(PY) -m pytest -q tests/integration

test: venv collection sim-build
	$(PY) -m pytest -q tests

clean:
	rm -rf .build $(SIM_DIR) .pytest_cache
