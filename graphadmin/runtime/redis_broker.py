"""The broker with ``CELERY_BROKER_URL=redis://...``: kombu's Redis transport, with one client per channel.

kombu's Redis channel builds a new ``redis.Redis`` for every synchronous command it sends
(``Channel._create_client``, through ``conn_or_acquire``): a publish's one LPUSH paid for a client object
whose constructor copies redis-py's table of some 170 response callbacks, about a fifth of the publish's
CPU (docs/history/performance-agent-session.md, "Issue 27: the hot endpoints"). Every report's wake-up of
the drain is such a publish (``feedback.reports``). The client holds no connection of its own (it borrows one from the
channel's pool for each command, as before), so one per channel serves every synchronous command of it;
the asynchronous client the worker consumes with is kombu's own, unchanged.
"""

from __future__ import annotations

from kombu.transport import redis


class Channel(redis.Channel):
    _sync_client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        if self._sync_client is None:
            self._sync_client = super()._create_client()
        return self._sync_client

    def close(self):
        self._sync_client = None
        super().close()


class Transport(redis.Transport):
    Channel = Channel
