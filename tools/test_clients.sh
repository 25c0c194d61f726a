#!/usr/bin/env bash
# make test-clients: the Python client (clients/python/, graphadmin-client) and each framework adapter, each extra in
# its own virtualenv under .local/clients/ at the lowest and at the newest version its range allows (docs/agents.md):
#   1. bare: `pip install ./clients/python` installs httpx and its own dependencies, nothing else;
#   2. all-newest: `[all]` then `pip check`; the client's own tests (sync, async, retries, the extras' errors);
#   3. per extra and version: `pip check`, then that adapter's offline tests (a stub server on 127.0.0.1 whose
#      requests and answers are checked against the product's OpenAPI schema, the framework's fake models);
#   4. tests/clients/ in the product's environment: two whole sessions at once per adapter against the real product
#      (pytest-django's live server, the real Celery worker), run by that virtualenv's Python: at the newest version
#      only by default (CLIENT_LIVE_VERSIONS="lowest newest" for both): the HTTP side does not change with the
#      framework's version, and each lowest version's use of its framework is what step 3 tests.
# The virtualenvs are made by uv (installed from PyPI into .local/clients/uv; pip took 20 minutes for half the
# matrix); each has pip too (`uv venv --seed`), for `pip check`. A virtualenv is kept until clients/python's
# pyproject.toml changes (CI starts without them: every version is the newest of its day).
# CLIENT_EXTRAS and CLIENT_VERSIONS choose a part of the matrix, e.g. CLIENT_EXTRAS=langchain CLIENT_VERSIONS=newest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ROOT=.local/clients
declare -A LOWEST=(
    [langchain]="langchain-core==1.0.0"
    [langgraph]="langchain-core==1.0.0 langgraph==1.0.0"
    [llamaindex]="llama-index-core==0.14.0"
    [openai-agents]="openai-agents==0.21.0"
    [pydantic-ai]="pydantic-ai-slim==2.0.0"
)
declare -A MODULE=([langchain]=langchain [langgraph]=langgraph [llamaindex]=llamaindex [openai-agents]=openai_agents
    [pydantic-ai]=pydantic_ai)
EXTRAS=${CLIENT_EXTRAS:-"langchain langgraph llamaindex openai-agents pydantic-ai"}
VERSIONS=${CLIENT_VERSIONS:-"lowest newest"}
LIVE_VERSIONS=${CLIENT_LIVE_VERSIONS:-newest}
mkdir -p "$ROOT"
start=$SECONDS

fresh() {  # fresh DIR: true (and DIR emptied) unless DIR's stamp is newer than the client's pyproject.toml
    [ -f "$1/.installed" ] && [ "$1/.installed" -nt clients/python/pyproject.toml ] && return 1
    rm -rf "$1"
}

if [ ! -x "$ROOT/uv/bin/uv" ]; then
    "$PY" -m venv "$ROOT/uv" && "$ROOT/uv/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.9,<1"
fi
UV="$ROOT/uv/bin/uv"

install() {  # install DIR SPEC...: a virtualenv with pip, SPEC installed by uv, then pip check
    local dir=$1
    shift
    "$UV" venv --quiet --seed --python "$PY" "$dir"
    VIRTUAL_ENV="$dir" "$UV" pip install --quiet "$@"
    "$dir/bin/python" -m pip check
    touch "$dir/.installed"
}

versions() {
    "$1/bin/python" -I -c "import importlib.metadata as m; print(' '.join(f'{d.metadata[\"Name\"]}=={d.version}' \
        for d in m.distributions() if d.metadata['Name'].lower() in \
        ('httpx', 'langchain-core', 'langgraph', 'llama-index-core', 'openai-agents', 'pydantic-ai-slim')))"
}

# 1. The bare package, by pip itself: httpx and what httpx needs, nothing else.
if fresh "$ROOT/bare"; then
    "$PY" -m venv "$ROOT/bare"
    "$ROOT/bare/bin/python" -m pip install --quiet --disable-pip-version-check ./clients/python
    touch "$ROOT/bare/.installed"
fi
"$ROOT/bare/bin/python" -I - <<'PYEOF'
import importlib.metadata as md
names = {d.metadata["Name"].lower().replace("_", "-") for d in md.distributions()} - {"pip", "setuptools"}
allowed = {"graphadmin-client", "httpx", "httpcore", "anyio", "idna", "certifi", "h11", "sniffio", "typing-extensions",
           "exceptiongroup"}
assert names <= allowed, f"pip install ./clients/python installed more than httpx and its dependencies: {sorted(names - allowed)}"
print(f"== bare: {', '.join(sorted(names))}")
PYEOF

# 2. Every extra at once, newest: pip check, and the client's own tests.
if fresh "$ROOT/all-newest"; then
    install "$ROOT/all-newest" -e "./clients/python[all,test]"
fi
echo "== all (newest): $(versions "$ROOT/all-newest")"
"$ROOT/all-newest/bin/python" -m pytest clients/python/tests/test_client.py clients/python/tests/test_extras.py -q \
    -p no:cacheprovider

# 3. Each extra in its own virtualenv at each version, offline.
venvs=()
for extra in $EXTRAS; do
    for which in $VERSIONS; do
        dir="$ROOT/$extra-$which"
        if fresh "$dir"; then
            pins=()
            [ "$which" = lowest ] && read -ra pins <<< "${LOWEST[$extra]}"
            install "$dir" -e "./clients/python[$extra,test]" "${pins[@]}"
        fi
        echo "== $extra ($which): $(versions "$dir")"
        "$dir/bin/python" -m pytest "clients/python/tests/test_${MODULE[$extra]}.py" -q -p no:cacheprovider
        if [[ " $LIVE_VERSIONS " == *" $which "* ]]; then
            venvs+=("$dir")
        fi
    done
done
echo "== offline done in $((SECONDS - start)) s"

# 4. Live: two whole sessions at once per adapter (and version of LIVE_VERSIONS) against the real product.
GRAPHADMIN_CLIENT_VENVS="${venvs[*]}" SECRET_KEY=${SECRET_KEY:-test-only-insecure-key} \
    CELERY_QUEUE_DIR=${CELERY_QUEUE_DIR:-.local/test-celery-queue} \
    .venv/bin/python -m pytest tests/clients -q -p no:cacheprovider "$@"
echo "== make test-clients: $((SECONDS - start)) s"
