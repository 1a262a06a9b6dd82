# citegate: the Makefile is the interface. `make help` lists the targets.
SHELL := /bin/bash
export PORT ?= 8099
export RAG_DATA_ROOT ?= .data
export RAG_API_TOKEN ?= rag-dev-token-123
export OMP_WAIT_POLICY ?= PASSIVE
UV ?= uv
EXTRAS := --extra local --extra e5 --extra mcp --extra browser --group infra --group fuzz
RUN := $(UV) run --frozen $(EXTRAS)

.PHONY: help install ui demo serve bench soak eval test test-unit test-integration test-e2e screenshots test-concurrency lint format typecheck synth clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

install: ## create .venv from the lock file (uv), then build the widget and console (make ui)
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet "uv==0.13.8"
	$(UV) sync --frozen --inexact $(EXTRAS)
	@$(MAKE) --no-print-directory ui

# npm ci only when ui/package-lock.json changed, every workspace included (the Docusaurus site the
# browser tests build: tests never reach the registry); esbuild then builds ui/dist in about a second.
ui: ## build the page widget (ui/dist/widget.js) and the console (ui/dist/console/) from ui/package-lock.json
	@if ! command -v npm >/dev/null; then echo "no npm: ui/dist not built (install Node.js 20+, then make ui)"; exit 0; fi; \
	cd ui && { test node_modules/.package-lock.json -nt package-lock.json \
		|| npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build

demo: install ## the whole job: start the local stack, ingest samples/, ask two questions, print cited answers
	$(RUN) citegate demo

serve: install ## run the local stack: embedded AWS, gateway on 127.0.0.1:$PORT, state under $RAG_DATA_ROOT
	$(RUN) citegate serve

test: install ## every test tier (unit, integration, end-to-end)
	$(RUN) pytest -q -n 2 --dist loadfile

test-unit: install ## unit tests: no AWS, no network
	$(RUN) pytest -q tests/unit

test-integration: install ## handlers in-process on the embedded AWS endpoint, through the gateway
	$(RUN) pytest -q tests/integration

test-e2e: install ## the real server over HTTP (make serve), including restarts
	$(RUN) pytest -q tests/e2e

screenshots: install ## retake docs/screenshots from the browser tests (other runs save them under bench-results/)
	CITEGATE_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(RUN) pytest -q tests/e2e/browser

test-concurrency: install ## many clients at once over real sockets: isolation, distinct writes, hang-ups mid-stream
	$(RUN) pytest -q tests/integration/concurrency

lint: install ## ruff lint and format check
	$(RUN) ruff check . && $(RUN) ruff format --check .

format: install ## apply ruff formatting
	$(RUN) ruff format . && $(RUN) ruff check --fix .

typecheck: install ## mypy strict on the layer
	$(RUN) mypy layers/citegate

# The whole-manual ingestion (issue 27): one `citegate ingest` of a real 1,167-page manual into a
# fresh `citegate serve`, against the embedder alone on the same children (about 10 more minutes on
# 2 cores). BENCH_MANUAL= skips it.
BENCH_MANUAL ?= postgresql
bench: install ## latency at 10k/100k chunks (in-process, gateway, 16 clients), ingestion throughput (a real manual too), cold start -> docs/results/bench.md
	$(RUN) python benchmarks/retrieval.py
	$(RUN) python benchmarks/ingestion.py --docs 200
	$(if $(strip $(BENCH_MANUAL)),$(RUN) python -m benchmarks.manuals --manuals $(BENCH_MANUAL) --only-ingest --bench)
	$(RUN) python -m infra.bundling --build-dir .cache/layer-build  # the layers whose sizes are reported (cached)
	$(RUN) python benchmarks/cold_start.py
	$(RUN) python benchmarks/bench_report.py

SOAK_ARGS ?=
soak: install ## the real server under 16 mixed concurrent clients, 120 s (SOAK_ARGS=--short: 30 s): lost writes, misrouted answers, stalls, RSS -> docs/results/soak.md
	$(RUN) python benchmarks/soak.py $(SOAK_ARGS)

EMBEDDERS ?= use
SETS ?= scifact,cmrc2018,squad2_dev
# Then the real manuals (Debian's doc packages, fetched and checked into .cache/manuals), each into a
# fresh `citegate serve` with the default embedder: docs/results/manuals.md. MANUALS= skips them.
MANUALS ?= python,git,postgresql
eval: install ## quality and honesty on the sets in benchmarks/data beside peers, then on real manuals (docs/results/; EMBEDDERS=use,e5 SETS=... MANUALS=...)
	$(UV) run --frozen --inexact --group bench $(EXTRAS) python -m benchmarks.evaluate --embedders $(EMBEDDERS) --sets $(SETS)
	$(if $(strip $(MANUALS)),$(RUN) python -m benchmarks.manuals --manuals $(MANUALS) --out docs/results)

synth: install ## cdk synth offline into cdk.out (CDK CLI v2 from npm, local Node, no Docker; layers cached in .cache/)
	@test -x .cache/cdk-cli/node_modules/.bin/cdk || npm install --no-save --no-audit --no-fund --loglevel=error \
		--prefix .cache/cdk-cli "aws-cdk@2.1148.1"
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true AWS_EC2_METADATA_DISABLED=true \
		CITEGATE_LAYER_BUILD_DIR="$${CITEGATE_LAYER_BUILD_DIR:-$(CURDIR)/.cache/layer-build}" \
		.cache/cdk-cli/node_modules/.bin/cdk synth --output cdk.out --quiet --no-notices $(CDK_ARGS)

clean: ## remove local state
	rm -rf $(RAG_DATA_ROOT) .pytest_cache
