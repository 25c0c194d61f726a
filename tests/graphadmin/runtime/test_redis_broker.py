"""The Redis broker (graphadmin/runtime/redis_broker.py): one synchronous client per channel, messages as before.

Needs the Redis server CELERY_BROKER_URL names (the CI and the load test use one); skipped without it.
"""

import os
import uuid

import pytest
from django.conf import settings
from kombu import Connection

from graphadmin.runtime.redis_broker import Transport

URL = os.environ.get("CELERY_BROKER_URL", "")
pytestmark = pytest.mark.skipif(not URL.startswith("redis://"), reason="needs CELERY_BROKER_URL=redis://...")


def test_settings_choose_it_for_a_redis_url():
    assert settings.CELERY_BROKER_TRANSPORT == "graphadmin.runtime.redis_broker:Transport"


def test_one_sync_client_per_channel_and_messages_go_through():
    name = f"test-redis-broker-{uuid.uuid4().hex}"
    with Connection(URL, transport=Transport) as conn:
        queue = conn.SimpleQueue(name)
        try:
            channel = queue.channel
            first = channel._create_client()
            assert channel._create_client() is first  # kombu's own built one per call
            assert channel._create_client(asynchronous=True) is not first
            for i in range(3):
                queue.put({"n": i})
            got = [queue.get(timeout=2) for _ in range(3)]
            assert [m.payload["n"] for m in got] == [0, 1, 2]
            for m in got:
                m.ack()
            assert channel._create_client() is first
        finally:
            queue.queue.delete()
            queue.close()
