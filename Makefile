# Build and test the PyTorch custom operators tutorials.
#
# `make` (or `make help`) lists the targets, from the `## ` comment on each.
# The three that matter most: `make check` after every edit, `make html` to
# build the site, `make test` for the whole suite. CONTRIBUTING.md and
# docs/dev/ say more.
#
# The first run creates a virtual environment from the pinned requirements in a
# cache directory outside the clone, keyed by the requirements' hash and the
# Python version, so every clone on the machine shares it. tools/envs.py makes
# it (with uv, installed from the registry; pip if uv cannot be had) and trusts
# it only once its install has finished. Override with `make html VENV=/some/dir`
# and choose the interpreter with `make html PYTHON=python3.12`.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
REQUIREMENTS := requirements.txt constraints.txt
REQUIREMENTS_HASH := $(shell cat $(REQUIREMENTS) | sha256sum | cut -c1-16)
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo unknown)
CACHE_HOME ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)
VENV ?= $(CACHE_HOME)/pytorch-custom-ops-site/venv-py$(PYTHON_VERSION)-$(REQUIREMENTS_HASH)
BIN := $(VENV)/bin

# Compiler caches (Inductor's generated code, compiled C++ extensions) live
# beside the virtual environment, so they survive `make clean` and fresh clones.
# The extensions' folder, where the shipping pages also keep the wheels they
# build, is one per environment: a build with another Python or PyTorch never
# mixes its wheels with this one's.
export TORCHINDUCTOR_CACHE_DIR ?= $(CACHE_HOME)/pytorch-custom-ops-site/inductor-cache
export TORCH_EXTENSIONS_DIR ?= $(CACHE_HOME)/pytorch-custom-ops-site/torch-extensions/$(notdir $(VENV))

SPHINXOPTS ?= -W --keep-going
BUILDDIR ?= _build
# Build only the pages whose path matches this regex: GALLERY_PATTERN=crop make html
export GALLERY_PATTERN

# The Chinese edition, built from the same tree right after the English one
# without running anything: a no-plot build keeps the outputs of every page
# whose source did not change since it last ran.
# The translated editions, as pagelib/layout.py defines them.
TRANSLATIONS := $(shell $(PYTHON) -c 'from pagelib import layout; print(*layout.TRANSLATIONS)')
TRANSLATED = $(BIN)/sphinx-build -b html $(SPHINXOPTS) -D plot_gallery=0 \
	-D language=$(1) . $(BUILDDIR)/html/$(1)
# `make html` skips an edition when no file it is made from changed since its
# last successful build (a no-op build then starts one Sphinx, not two): the
# stamp is taken when the build starts, so an edit made while it ran counts.
# Every top-level page, configuration and requirements file counts, so a new
# top-level .rst does too.
EDITION_INPUTS := advanced locale _ext pagelib _templates _static versions tutorials \
	Makefile $(filter-out sg_execution_times.rst,$(wildcard *.rst *.py *.txt))
TRANSLATED_IF_CHANGED = stamp=$(BUILDDIR)/html/$(1)/.built-from-inputs; \
	if [ -f $$stamp ] && [ -z "$$(find $(EDITION_INPUTS) -type f ! -name '*.pyc' ! -name '*.mo' \
		-newer $$stamp -print -quit 2>/dev/null)" ]; then \
		echo "$(1): nothing it is built from changed; kept as it is"; \
	else mkdir -p $(BUILDDIR)/html/$(1) && touch $$stamp.new && $(TRANSLATED) \
		&& mv $$stamp.new $$stamp; fi

.PHONY: help wheel html html-noplot check pagelint unit test lint format clean venv \
	bench bench-build bench-ci bench-disk bench-checker bench-record guide screenshot \
	matrix matrix-table matrix-stale matrix-costs catalogs prune-envs workflows-lint lint-venv

# Every target with a `## ` comment, in the order of this file.
help: ## list the targets (the default)
	@echo "make <target>, where <target> is one of:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z-]+:.*## / { printf "  %-15s %s\n", $$1, $$2 }' \
		$(firstword $(MAKEFILE_LIST))
	@echo "The first run makes the site's environment (see CONTRIBUTING.md)."

html: venv ## build both editions into _build/html, running the pages that changed
	$(BIN)/sphinx-build -b html $(SPHINXOPTS) . $(BUILDDIR)/html
	@$(foreach language,$(TRANSLATIONS),$(call TRANSLATED_IF_CHANGED,$(language)) &&) true

html-noplot: venv ## build both editions without running any page
	$(BIN)/sphinx-build -b html $(SPHINXOPTS) -D plot_gallery=0 . $(BUILDDIR)/html
	$(foreach language,$(TRANSLATIONS),$(call TRANSLATED,$(language)) &&) true

# The fast lane: what to run after every edit. Nothing here runs a page; a
# stale version record, a broken reference or an untranslated message fails it.
# Its no-plot build has a build directory of its own: its configuration differs
# from `make html`'s (plot_gallery), and sharing _build/html would make the
# next `make html` write every page again.
check: lint workflows-lint pagelint unit ## after every edit: lint, page lint, unit tests, catalogs, no-plot build
	$(BIN)/python tools/catalogs.py check
	$(MAKE) --no-print-directory html-noplot BUILDDIR=$(BUILDDIR)/check

# Every piece a page lacks besides its script, one line each with the file to
# edit (pagelib/pagelint.py). Before the unit tests, so that a new page gets the
# whole list rather than the first failing assertion.
pagelint: venv ## what each page lacks besides its script, and the file to edit
	$(BIN)/python -m pagelib.pagelint

# --confcutdir: the fast lane loads its own conftest only (tests/unit/conftest.py),
# not the slow lane's (its site fixtures, and its CI guard against narrowed runs).
# The checker package's own tests run from its folder, with its own settings,
# its slow ones (child processes, a hang) left to `make test`.
unit: venv ## the unit tests: tests/unit/ and the checker's fast tests
	$(BIN)/python -m pytest -q -p no:cacheprovider --confcutdir=tests/unit tests/unit
	cd operator_checker && $(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow"

# The course's checker as a wheel (operator_checker/, see pagelib/checker.py):
# `pip install _build/wheels/operator_checker-*.whl` in any environment with
# PyTorch 2.7 or later. The site serves the same wheel under wheels/.
wheel: venv ## the checker's wheel, into _build/wheels/
	@$(BIN)/python -c 'import sys; from pagelib import checker; print(checker.build_wheel(sys.executable, sys.argv[1]))' $(BUILDDIR)/wheels

# After editing English prose: bring the catalogs in locale/ up to date, then
# translate what is new or fuzzy.
catalogs: venv ## bring the Chinese catalogs up to date after an English edit
	$(BIN)/python tools/catalogs.py update

# axe-core, from the npm registry, for the accessibility audit of the browser
# tests; kept beside the virtual environment.
AXE_VERSION := 4.14.1
AXE_DIR := $(CACHE_HOME)/pytorch-custom-ops-site/npm/axe-core-$(AXE_VERSION)
AXE := $(AXE_DIR)/node_modules/axe-core/axe.min.js

$(AXE):
	@command -v npm >/dev/null || { echo "error: npm is needed to install axe-core for the accessibility tests" >&2; exit 2; }
	npm install --silent --no-audit --no-fund --prefix $(AXE_DIR) axe-core@$(AXE_VERSION)

# The suite runs in pytest-xdist workers, one per core: the tests that need
# the site's build (and the notebook runs it starts) or the planted breakages
# each go to one worker (tests/conftest.py groups them), and the others fill in around them.
# Inductor compiles in the process that asks (TORCHINDUCTOR_COMPILE_THREADS=1):
# the workers keep every core busy already, and on the older releases each
# process that compiles would otherwise start a pool of compile workers, a
# fresh interpreter importing torch that compiles nothing when the caches are
# warm. Inductor's check that the compiler builds and loads its vector
# instruction set (TORCHINDUCTOR_VEC_ISA_OK) is taken as passed: up to 2.12,
# every process that compiles starts an interpreter importing torch to load the
# test library, for each instruction set it tries (a second of CPU each, 42
# processes in the notebooks of one run); where the check passes, as on this
# machine, the generated code is the same.
TEST_WORKERS ?= auto
test: lint workflows-lint $(AXE) ## the whole test suite, as CI runs it (TEST_WORKERS=, PYTEST_ARGS=)
	AXE_CORE=$(AXE) TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_VEC_ISA_OK=1 \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Every page under every release of versions/matrix.toml, records in
# versions/records/. Narrow it with PAGES="a b" and RELEASES="2.7.1 2.15.0";
# RECORDS=dir writes the records there instead (one shard of the workflow);
# REQUIRE_CUDA=1 fails every page that did not run on CUDA (the GPU lane);
# STRICT=1 exits non-zero when a page fails.
matrix: venv ## run pages under the matrix's releases and record them (PAGES= RELEASES= ...)
	$(BIN)/python tools/matrix.py run $(if $(PROBE),--probe) $(foreach p,$(PAGES),--page $(p)) $(foreach r,$(RELEASES),--release $(r)) $(if $(RECORDS),--records $(RECORDS)) $(if $(filter 1 yes true,$(REQUIRE_CUDA)),--require-cuda) $(if $(filter 1 yes true,$(STRICT)),--strict)

matrix-table: venv ## print the version matrix as a table
	$(BIN)/python tools/matrix.py table

matrix-stale: venv ## list the pages whose records are missing or stale
	$(BIN)/python tools/matrix.py stale

matrix-costs: venv ## what each shard of the matrix workflow costs, from the records
	$(BIN)/python tools/matrix.py costs

# Delete the environments (site and matrix) this checkout no longer uses.
prune-envs: ## delete the environments this checkout no longer uses
	$(PYTHON) tools/envs.py prune --keep-venv $(VENV)

# Cold, no-op and single-example build times, each example's run time and each
# page's weight, measured in a scratch copy: _build/bench-build.json and a table.
# WARM_CACHES_ONLY=1 skips the cold build with empty compiler caches.
bench-build: venv ## time the builds (cold, no-op, prose edit), weigh the pages
	$(BIN)/python tools/bench_build.py --venv $(VENV) $(if $(filter 1 yes true,$(WARM_CACHES_ONLY)),--warm-caches-only)

bench: bench-build ## the same as bench-build, its former name

# Where CI's time goes (tools/bench_ci.py): `bash .ci/run` in a fresh clone of
# HEAD, then the slowest steps of the suite and every page's run time, as
# tables in _build/bench-ci.md. BENCH_CI_FROM=dir reads a clone already run.
bench-ci: venv ## CI's command in a fresh clone, and where its time went
	$(BIN)/python tools/bench_ci.py $(if $(BENCH_CI_FROM),--from $(BENCH_CI_FROM))

# The disk each workflow job's environments take (tools/bench_disk.py): makes
# every environment of the matrix, measures, writes .ci/environment-disk.json
# (committed; the workflow tests read it).
bench-disk: venv ## the disk each workflow job's environments take
	$(BIN)/python tools/bench_disk.py

# check_operator's seconds per operator on the field test's corpus (torchvision,
# torch.nn, torch.onnx), with warm compiler caches, beside opcheck's:
# _build/bench-checker.json and a table.
bench-checker: venv ## check_operator's seconds on real operators, beside opcheck's
	$(BIN)/python tools/bench_checker.py

# The figures of the last bench-* runs (_build/bench-*.json, each with the
# machine it ran on) become the reference figures: docs/dev/benchmarks.json,
# rendered into docs/dev/performance.md.
bench-record: venv ## keep the last bench-* figures as the reference ones
	$(BIN)/python tools/benchmarks.py record

# The tables of docs/dev/ that are made from data: the version records, the
# disk figures, the reference figures and the test modules' docstrings. A
# unit test fails when one is out of date.
guide: venv ## rewrite the guide's generated tables from their data
	$(BIN)/python tools/guide.py write

# The README's picture of a page, taken from the last `make html`.
screenshot: venv ## the README's picture of a page, from _build/html
	$(BIN)/python tools/screenshot.py

# The workflow linters, pinned in tools/lint-requirements.txt and installed
# into an environment of their own (keyed by that file's hash, like the
# site's), so that they never change the site environment: check-jsonschema
# validates every workflow against the GitHub-workflow schema it ships (and
# .github/dependabot.yml against Dependabot's), and zizmor audits them offline,
# failing on any finding of medium severity or more.
LINT_REQUIREMENTS := tools/lint-requirements.txt
LINT_HASH := $(shell sha256sum < $(LINT_REQUIREMENTS) | cut -c1-16)
LINT_VENV ?= $(CACHE_HOME)/pytorch-custom-ops-site/lint-py$(PYTHON_VERSION)-$(LINT_HASH)
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

lint-venv: ## make the workflow linters' environment
	@$(PYTHON) tools/envs.py tools --venv $(LINT_VENV) --requirements $(LINT_REQUIREMENTS)

workflows-lint: lint-venv ## validate and audit .github/ (check-jsonschema, zizmor, shellcheck)
	$(LINT_VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	$(LINT_VENV)/bin/check-jsonschema --builtin-schema vendor.dependabot .github/dependabot.yml
	$(LINT_VENV)/bin/zizmor --offline --min-severity medium --no-progress .github
	$(LINT_VENV)/bin/python tools/workflow_shell.py $(WORKFLOWS)

lint: venv ## ruff check, ruff format --check and sphinx-lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/sphinx-lint index.rst start_here.rst advanced/ locale/ pagelib/ _ext/

format: venv ## apply ruff format and ruff's safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Everything .gitignore calls generated; the compiler caches and the
# environments live outside the clone and stay.
clean: ## delete what the build generates (_build/, tutorials/, api/, ...)
	rm -rf $(BUILDDIR) tutorials tutorials_zh_CN api sg_execution_times.rst
	$(if $(wildcard locale _ext/locale),find $(wildcard locale _ext/locale) -name '*.mo' -delete)

# Checked on every make run, and cheap when the environment is complete.
venv: ## make the site's environment (every target that needs it does)
	@$(PYTHON) -c '' 2>/dev/null || { echo "error: PYTHON=$(PYTHON) does not run here; choose an installed Python 3.11, 3.12 or 3.13 with PYTHON=, e.g. make html PYTHON=python3.11" >&2; exit 2; }
	@$(PYTHON) tools/envs.py site --venv $(VENV)
