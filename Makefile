# Everything the project needs is installed from this file, pyproject.toml, constraints.txt and package.json.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-install
NPM_STAMP := node_modules/.stamp-install
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export SAGEMAKER_SUPPRESS_V2_WARNING := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install test lint typecheck pytest validate demo synth bench browser smdebug-env sdk-v3-env transformers-env lightning-env clean

install: $(STAMP) $(NPM_STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip>=24"
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	touch $@

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Headless Chromium for the HTML report test (Debian's package). Installed only where we are root with apt;
# elsewhere the browser test is skipped with a message saying how to enable it.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian chromium for the report browser test"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium not found: browser tests will be skipped (apt-get install chromium)"; fi

# smdebug 1.0.34 in a side environment of its own (never a project dependency; bench/smdebug_env.sh, about 20 s
# the first time): the tensor compatibility tests run smdebug's reader on what we write, and the rule parity tests
# the 2020 rule code. Where it cannot be built, those tests skip and say why.
smdebug-env:
	@bash bench/smdebug_env.sh >/dev/null 2>&1 || echo "smdebug side env (bench/smdebug_env.sh) could not be built: the smdebug compatibility and parity tests will skip"

lint: install
	$(VENV)/bin/ruff check src tests infra lambdas examples bench

typecheck: install
	$(VENV)/bin/mypy src infra

# The SageMaker Python SDK v3 in a side environment of its own (v3 cannot share a virtualenv with the project's v2;
# bench/sdk_v3_env.sh: sagemaker 3.x and this tree's wheel, about 5 minutes and 1 GB the first time, a few seconds
# after a source change): tests/functional/plan/test_sdk_v3.py runs ModelTrainer and TrainingJob.create there.
# Where it cannot be built, those tests skip and say why.
sdk-v3-env:
	@bash bench/sdk_v3_env.sh >/dev/null 2>&1 || echo "SDK v3 side env (bench/sdk_v3_env.sh) could not be built: the SDK v3 tests will skip"

# The framework integrations' side environments (never project dependencies; torch 2.13.0 CPU, the framework and
# this tree's wheel; about 4 minutes each the first time, a few seconds after a source change):
# tests/functional/integrations/ run docs/frameworks.md's snippets there. Where one cannot be built, its tests skip.
transformers-env:
	@bash bench/transformers_env.sh >/dev/null 2>&1 || echo "transformers side env (bench/transformers_env.sh) could not be built: the Hugging Face integration tests will skip"

lightning-env:
	@bash bench/lightning_env.sh >/dev/null 2>&1 || echo "lightning side env (bench/lightning_env.sh) could not be built: the Lightning integration tests will skip"

pytest: install browser smdebug-env sdk-v3-env transformers-env lightning-env
	$(VENV)/bin/pytest -q

test: lint typecheck pytest

# The infra validators alone (they also run in `make test`, as tests/infra/test_infra_validators.py):
# cfn-lint on every synthesized configuration, asl-validator on every state machine definition.
validate: install
	$(VENV)/bin/pytest -q tests/infra/test_infra_validators.py

demo: install
	$(PY) examples/demo.py

synth: install
	source $(VENV)/bin/activate && npx cdk synth --quiet

bench: install
	$(PY) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache
