"""The stub server (tests/stub.py) and clients on it, for every adapter's offline tests."""

from __future__ import annotations

import pytest

from graphadmin_client import AsyncGraphClient, GraphClient

from .stub import serve


@pytest.fixture
def stub():
    server, state = serve()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()
    assert state.errors == [], "requests or answers off the OpenAPI schema:\n" + "\n".join(state.errors)


@pytest.fixture
def client(stub):
    with GraphClient(stub.url, "stub-token", backoff=0) as gc:
        yield gc


@pytest.fixture
def aclient(stub):
    return AsyncGraphClient(stub.url, "stub-token", backoff=0)
