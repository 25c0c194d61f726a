# The two commands: `make run` (the product on a demo graph) and `make test` (the whole suite).
# Each does all set-up on a fresh machine that has Python 3.11+ and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py rundemo

# The suite's filesystem queue is its own, so a running `make run` worker never takes its tasks.
test: $(STAMP)
	SECRET_KEY=$${SECRET_KEY:-test-only-insecure-key} CELERY_QUEUE_DIR=$${CELERY_QUEUE_DIR:-.local/test-celery-queue} \
		$(BIN)/python -m pytest $(PYTEST_ARGS)
