"""The broker of ``make run`` without ``CELERY_BROKER_URL``: kombu's filesystem transport, made safe to poll fast.

kombu's filesystem transport creates a message's file under its final name and then writes it; a
consumer listing the folder at that moment takes the empty file and fails to decode it (the writer's
lock does not stop the reader's rename). At the default 1 s poll the window was rarely hit; polling
every 50 ms (settings: ``polling_interval``) under load, it stopped the worker within seconds. Here a
message is written under a name no consumer takes (``.tmp`` after ``.msg``) and renamed into place:
a rename within a folder is atomic, so a consumer sees a complete message or none.

The exchange's binding table (``control/<exchange>.exchange``) has the same flaw: kombu creates the file
empty, then locks and writes it, so a producer publishing while a worker declares its queues (a worker
starting beside a busy web process) can read it empty and fail to publish. Here a binding is added
under a separate lock file and the table is replaced whole by a rename, so every read sees a table.
And kombu keeps the bindings it declared in one state per process, marked before the table is written:
a second thread of the process (gunicorn's threads) took the mark for done and published into a table
not yet there, and the message went nowhere. Here a process's binds run one at a time, mark and table
together.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.json import dumps

# kombu's filesystem transport shares one BrokerState among every connection of the process.
_BINDING = threading.Lock()


class Channel(filesystem.Channel):
    def queue_bind(self, *args, **kwargs):
        """kombu's bind (mark the binding in the process's state, then write the table), one thread at a
        time: another thread sees the mark only once the table holds the binding."""
        with _BINDING:
            return super().queue_bind(*args, **kwargs)

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: written aside, then renamed to the name consumers look for."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".tmp"
        try:
            with open(partial, "wb") as f:
                f.write(dumps(payload).encode())
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        """Add a binding to the exchange's table: read, extend and replace it whole, one binder at a time."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        try:
            with open(file.with_name(file.name + ".lock"), "a") as guard:
                filesystem.lock(guard, filesystem.LOCK_EX)
                try:
                    queues = self.get_table(exchange)
                    if entry in queues:
                        return
                    queues.insert(0, entry)
                    partial = file.with_name(f"{file.name}.{uuid.uuid4().hex}.tmp")
                    partial.write_bytes(dumps(queues).encode())
                    os.replace(partial, file)
                finally:
                    filesystem.unlock(guard)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot open {file}") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def make_folders(queue_dir: Path) -> None:
    """The queue's folder and its result backend's (``results/``), if missing: kombu lists the one and Celery's
    file backend refuses to start without the other. Called by each process as it configures Celery
    (graphadmin/celery.py), so a fresh clone needs no folder made beforehand."""
    (queue_dir / "results").mkdir(parents=True, exist_ok=True)
