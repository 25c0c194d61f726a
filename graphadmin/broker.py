"""The broker of ``make run`` without ``CELERY_BROKER_URL``: kombu's filesystem transport, made safe to poll fast.

kombu's filesystem transport creates a message's file under its final name and then writes it; a
consumer listing the folder at that moment takes the empty file and fails to decode it (the writer's
lock does not stop the reader's rename). At the default 1 s poll the window was rarely hit; polling
every 50 ms (settings: ``polling_interval``) under load, it stopped the worker within seconds. Here a
message is written under a name no consumer takes (``.tmp`` after ``.msg``) and renamed into place:
a rename within a folder is atomic, so a consumer sees a complete message or none.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
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


class Transport(filesystem.Transport):
    Channel = Channel
