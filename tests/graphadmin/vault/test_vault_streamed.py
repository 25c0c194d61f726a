"""A streamed import writes what an in-memory one writes (issue 26, item 5): with every note body spooled to
the temporary file and the nodes written and recorded in runs of a few hundred bytes, the nodes, their texts,
the records of the batch and a rollback are those of the plain import."""

import io
import zipfile

import pytest

from feedback.actions import do_rollback_batch
from feedback.imports import do_import_vault
from feedback.models import RecordChange, UpdateBatch
from graphadmin.models import Node
from graphadmin.vault import apply, parse
from graphadmin.vault.parse import VaultError, parse_vault
from tests.graphadmin.vault.test_vault_import import FIXTURE

pytestmark = pytest.mark.django_db


def _texts(graph):
    return dict(Node.objects.filter(graph=graph).values_list("key", "text"))


def test_spooled_bodies_read_back_as_parsed(monkeypatch):
    plain = parse_vault(FIXTURE)
    monkeypatch.setattr(parse.TextSpool, "INLINE_CHARS", 0)
    spooled = parse_vault(FIXTURE)
    assert all(isinstance(n.body, parse.SpooledText) for n in spooled.notes.values())
    assert {k: n.text for k, n in spooled.notes.items()} == {k: n.text for k, n in plain.notes.items()}
    spooled.close()
    with pytest.raises(ValueError, match="closed"):
        _ = next(iter(spooled.notes.values())).text


def test_a_streamed_import_writes_and_records_what_a_plain_one_does(monkeypatch, acme_graph, globex_graph, oscar):
    do_import_vault(globex_graph, parse_vault(FIXTURE), actor="command:test", embed="sync")
    monkeypatch.setattr(parse.TextSpool, "INLINE_CHARS", 0)
    monkeypatch.setattr(apply, "TEXT_CHUNK_BYTES", 300)  # a run or two per note
    result = do_import_vault(acme_graph, parse_vault(FIXTURE), actor=oscar, embed="sync")
    assert result.counts["nodes_created"] == 9
    assert _texts(acme_graph) == _texts(globex_graph)
    created = RecordChange.objects.filter(batch_id=result.batch_id, target="node", op="create")
    assert created.count() == 9 and {r.after["text"] for r in created} == set(_texts(acme_graph).values())
    do_rollback_batch(UpdateBatch.objects.get(pk=result.batch_id), actor=oscar)
    assert not Node.objects.filter(graph=acme_graph, archived=False).exists()


def test_a_note_whose_header_lies_about_its_size_refuses_the_archive_naming_it():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ok.md", "fine")
        archive.writestr("liar.md", "x" * 5000)
    data = bytearray(buffer.getvalue())
    # The central directory's uncompressed size of liar.md: 5000 -> 50 (the data unpacks to more).
    at = data.rfind(b"liar.md") - 46 + 24
    assert int.from_bytes(data[at : at + 4], "little") == 5000
    data[at : at + 4] = (50).to_bytes(4, "little")
    with pytest.raises(VaultError, match="liar.md"):
        parse_vault(io.BytesIO(bytes(data)))
