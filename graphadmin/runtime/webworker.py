"""The web worker class (``graphadmin/gunicorn_conf.py``): gunicorn's gthread worker that lets go of the port
at once when its master died.

When the gunicorn master is killed (``kill -9``, an out-of-memory kill), its workers notice ("Parent
changed, shutting down") and finish their connections for up to ``graceful_timeout`` seconds (30) before
they close their copy of the listening socket. Meanwhile the master `make run` (or systemd) starts again
cannot bind the port ("Connection in use") and exits, and web is down for those 30 s plus the restart
backoff: measured by ``bench.chaos`` (issue 41). This worker closes its listeners as soon as it stops
accepting because the master is gone (it accepts nothing more anyway), so the new master binds at once;
the requests in flight still finish. A graceful stop by a live master is unchanged.

It also times each request's wait in the thread pool's queue, from the moment the worker queues it (a new
connection accepted, a kept-alive one readable again) to the moment a thread takes it, and hands that wait
to the thread (``graphadmin.runtime.admission``): a request that waited past its budget is answered 503
with ``Retry-After`` instead of seconds late.
"""

from __future__ import annotations

import os
import time

from gunicorn.workers.gthread import ThreadWorker

from graphadmin.runtime import admission


class Worker(ThreadWorker):
    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled)
        if not enabled and self.ppid != os.getppid():  # the master is gone (is_parent_alive() logs it again)
            for listener in self.sockets:
                listener.close()

    def enqueue_req(self, conn) -> None:
        conn.queued_at = time.monotonic()
        super().enqueue_req(conn)

    def handle(self, conn):
        queued_at = getattr(conn, "queued_at", None)
        admission.record_wait(None if queued_at is None else time.monotonic() - queued_at)
        return super().handle(conn)
