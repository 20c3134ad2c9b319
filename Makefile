# Build and test the PyTorch custom operators tutorials.
#
#   make html          build the site into _build/html, running every example
#   make test          run the whole test suite (lint, examples, build, notebooks)
#   make bench         measure build times and page weights (_build/bench.json)
#
# The first run creates a virtual environment from the pinned requirements in a
# cache directory outside the clone, keyed by the requirements' hash, so every
# clone on the machine shares it. Override with `make html VENV=/some/dir`.

SHELL := /bin/bash
.DEFAULT_GOAL := html

PYTHON ?= python3
REQUIREMENTS := requirements.txt constraints.txt
REQUIREMENTS_HASH := $(shell cat $(REQUIREMENTS) | sha256sum | cut -c1-16)
CACHE_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
VENV ?= $(CACHE_HOME)/pytorch-custom-ops-site/venv-$(REQUIREMENTS_HASH)
BIN := $(VENV)/bin
# The stamp names the requirements it was installed from: a venv that is older
# than the requirements files is brought up to date, one that already matches
# them (say, after a fresh clone) is only touched.
VENV_STAMP := $(VENV)/.installed-$(REQUIREMENTS_HASH)

# Compiler caches (Inductor's generated code, compiled C++ extensions) live
# beside the virtual environment, so they survive `make clean` and fresh clones.
export TORCHINDUCTOR_CACHE_DIR ?= $(CACHE_HOME)/pytorch-custom-ops-site/inductor-cache
export TORCH_EXTENSIONS_DIR ?= $(CACHE_HOME)/pytorch-custom-ops-site/torch-extensions

SPHINXOPTS ?= -W --keep-going
BUILDDIR ?= _build
# Build only the pages whose path matches this regex: GALLERY_PATTERN=crop make html
export GALLERY_PATTERN

.PHONY: html html-noplot test lint format clean venv bench

html: $(VENV_STAMP)
	$(BIN)/sphinx-build -b html $(SPHINXOPTS) . $(BUILDDIR)/html

html-noplot: $(VENV_STAMP)
	$(BIN)/sphinx-build -b html $(SPHINXOPTS) -D plot_gallery=0 . $(BUILDDIR)/html

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Cold, no-op and single-example build times, each example's run time and each
# page's weight, measured in a scratch copy: _build/bench.json and a table.
bench: $(VENV_STAMP)
	$(BIN)/python tools/bench_build.py --venv $(VENV)

lint: $(VENV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/sphinx-lint index.rst start_here.rst advanced/

format: $(VENV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(BUILDDIR) tutorials sg_execution_times.rst

venv: $(VENV_STAMP)

$(VENV_STAMP): $(REQUIREMENTS)
	@if [ -f $@ ]; then touch $@; else \
	  set -e; \
	  echo "Installing the pinned requirements into $(VENV)"; \
	  [ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV); \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check \
	    -r requirements.txt -c constraints.txt; \
	  rm -f $(VENV)/.installed-*; \
	  touch $@; \
	fi
