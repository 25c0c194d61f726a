"""The background/foreground choice of a vault upload goes by what the archive unpacks to and its number of
notes, never its compressed size alone (issue 26, item 5): a small zip of large repetitive notes, well
under every limit, is a background import (202 and a queued record), not a parse in the web request."""

import io
import zipfile

import pytest

from feedback.models import VaultImport
from graphadmin.models import OutboxTask
from graphadmin.vault.parse import MAX_NOTE_BYTES, zip_extent
from tests.feedback.test_import_api import fixture_zip, post

pytestmark = pytest.mark.django_db


def _repetitive_zip(notes: int) -> io.BytesIO:
    body = "# Note\n\n" + "The same sentence again and again. " * (MAX_NOTE_BYTES // 36)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for i in range(notes):
            archive.writestr(f"Vault/note-{i}.md", body)
    buffer.seek(0)
    buffer.name = "vault.zip"
    return buffer


def test_a_small_zip_that_unpacks_large_is_imported_in_the_background(api, oscar, acme_graph, settings):
    upload = _repetitive_zip(20)  # 20 notes of almost 2 MiB: 40 MiB unpacked from a zip of a few hundred KB
    assert len(upload.getvalue()) < settings.VAULT_IMPORT_ASYNC_BYTES
    unpacked, notes = zip_extent(upload)
    assert notes == 20 and unpacked > settings.VAULT_IMPORT_ASYNC_UNPACKED_BYTES
    response = post(api(oscar), acme_graph, upload)
    assert response.status_code == 202, response.content
    record = VaultImport.objects.get()
    assert record.state == "queued"
    assert OutboxTask.objects.get().name == "feedback.import_vault"  # sent once the request commits


def test_many_small_notes_are_imported_in_the_background(api, oscar, acme_graph, settings):
    settings.VAULT_IMPORT_ASYNC_NOTES = 5
    assert post(api(oscar), acme_graph, fixture_zip()).status_code == 202  # the fixture vault has 9 notes


def test_a_small_vault_stays_in_the_request(api, oscar, acme_graph):
    assert post(api(oscar), acme_graph, fixture_zip()).status_code == 201
    assert not VaultImport.objects.exists() and not OutboxTask.objects.exists()
