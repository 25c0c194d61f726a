"""The archive of issue 26, item 5: a zip of 240 notes of 2 MiB each (480 MiB unpacked from about half a
megabyte), as a dry run. The web request only queues it (202, nothing unpacked), and the worker reads the
notes one entry at a time, their bodies spooled to a temporary file: its memory grows by a bounded amount,
not by the 480 MiB the archive holds.

Memory is the resident set size sampled every few milliseconds from /proc/self/statm while each step runs
(the figures are printed: ``-s``); the bound asserted is generous (200 MB), the archive's bodies alone
would be 480 MiB (twice that as Python strings and their stripped copies)."""

import io
import os
import threading
import time
import zipfile

import pytest

from feedback.models import VaultImport
from feedback.tasks import import_vault_task
from graphadmin.vault.parse import MAX_NOTE_BYTES
from tests.feedback.test_import_api import post

# No test transaction around the worker's step: like a worker, it commits its progress as it goes (and a
# transaction left open during the parse would meet idle_in_transaction_session_timeout).
pytestmark = pytest.mark.django_db(transaction=True)

NOTES = 240
LINE = "The same sentence again and again, line after line, as in the archive of the issue.\n"
PAGE = os.sysconf("SC_PAGE_SIZE")


def issue_zip() -> io.BytesIO:
    """240 notes of exactly MAX_NOTE_BYTES (2 MiB, the per-note cap) each, deflated; each links to the next."""
    filler = LINE * (MAX_NOTE_BYTES // len(LINE) + 1)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for i in range(NOTES):
            archive.writestr(
                f"Vault/note-{i}.md", (f"# Note {i}\n\nSee [[note-{(i + 1) % NOTES}]].\n\n" + filler)[:MAX_NOTE_BYTES]
            )
    buffer.seek(0)
    buffer.name = "vault.zip"
    return buffer


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


class PeakRss:
    """The largest resident set size seen while the block runs, and its growth over the start."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._clock = time.perf_counter()
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._clock
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())
        self.growth = self.peak - self.start
        return False


MB = 1_000_000


def test_the_issue_archive_is_queued_and_read_by_the_worker_in_bounded_memory(api, oscar, acme_graph):
    upload = issue_zip()
    compressed = len(upload.getvalue())
    with PeakRss() as web:
        response = post(api(oscar), acme_graph, upload, dry_run="true")
    assert response.status_code == 202, response.content  # queued, not unpacked in the request
    record = VaultImport.objects.get()
    assert record.state == "queued" and record.dry_run
    with PeakRss() as worker:
        import_vault_task(record.pk)
    record.refresh_from_db()
    assert record.state == "succeeded", record.error
    assert record.counts["notes"] == NOTES and record.counts["nodes_created"] == NOTES
    assert record.counts["edges_created"] == NOTES and record.counts["files_skipped"] == 0
    print(
        f"\nissue archive: {compressed:,} bytes compressed, {NOTES * MAX_NOTE_BYTES:,} unpacked;"
        f" web request {web.seconds:.2f} s, RSS {web.start / MB:.0f} -> {web.peak / MB:.0f} MB"
        f" (+{web.growth / MB:.0f});"
        f" worker {worker.seconds:.1f} s, RSS {worker.start / MB:.0f} -> {worker.peak / MB:.0f} MB"
        f" (+{worker.growth / MB:.0f})"
    )
    assert web.growth < 50 * MB
    assert worker.growth < 200 * MB
