"""POST /api/graphs/{id}/import/: operators import a zipped vault; unsafe archives are refused whole."""

import io
import zipfile
from pathlib import Path

import pytest

from feedback.models import UpdateBatch
from graphadmin.models import AuditEvent, Node

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vault"


def fixture_zip(extra: dict | None = None, prefix: str = "vault/") -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(FIXTURE.rglob("*")):
            if path.is_file():
                zf.write(path, prefix + path.relative_to(FIXTURE).as_posix())
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    buf.seek(0)
    buf.name = "vault.zip"
    return buf


def post(client, graph, archive, **fields):
    return client.post(f"/api/graphs/{graph.pk}/import/", {"file": archive, **fields}, format="multipart")


def nothing_written(graph):
    return (
        not Node.objects.filter(graph=graph).exists()
        and not UpdateBatch.objects.filter(graph=graph).exists()
        and not AuditEvent.objects.filter(action="graph.import").exists()
    )


def test_operator_imports_a_zipped_vault(api, oscar, acme_graph):
    response = post(api(oscar), acme_graph, fixture_zip())
    assert response.status_code == 201, response.data
    body = response.json()
    assert body["counts"]["nodes_created"] == 9 and body["counts"]["edges_created"] == 22
    assert len(body["unresolved"]) == 2 and body["warnings"][0].startswith("Research/latin1.md")
    assert Node.objects.filter(graph=acme_graph, key="Home", source="vault:Home.md").exists()
    batch = UpdateBatch.objects.get(pk=body["batch"])
    assert batch.kind == "import" and batch.trigger_user == oscar
    # The same archive again changes nothing.
    again = post(api(oscar), acme_graph, fixture_zip()).json()
    assert again["counts"]["nodes_unchanged"] == 9 and again["counts"]["edges_unchanged"] == 22


def test_dry_run_answers_200_and_writes_nothing(api, alice, acme_graph):
    response = post(api(alice), acme_graph, fixture_zip(), dry_run="true")
    assert response.status_code == 200 and response.json()["dry_run"] is True
    assert nothing_written(acme_graph)


@pytest.mark.parametrize("user", ["ana", "rita"])
def test_analysts_and_reviewers_may_not_import(api, request, acme_graph, user):
    response = post(api(request.getfixturevalue(user)), acme_graph, fixture_zip())
    assert response.status_code == 403 and nothing_written(acme_graph)


def test_other_organizations_graph_is_404(api, mallory, acme_graph):
    assert post(api(mallory), acme_graph, fixture_zip()).status_code == 404
    assert nothing_written(acme_graph)


@pytest.mark.parametrize("evil", ["../../etc/cron.d/x.md", "/tmp/abs.md", "vault/../../up.md"])
def test_zip_slip_is_400_and_writes_nothing(api, oscar, acme_graph, evil):
    response = post(api(oscar), acme_graph, fixture_zip({evil: "[[Home]]"}))
    assert response.status_code == 400 and "file" in response.data
    assert nothing_written(acme_graph)


def test_symlink_entry_is_400(api, oscar, acme_graph):
    buf = fixture_zip()
    with zipfile.ZipFile(buf, "a") as zf:
        info = zipfile.ZipInfo("vault/link.md")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "../../secret")
    buf.seek(0)
    response = post(api(oscar), acme_graph, buf)
    assert response.status_code == 400 and "symlink" in str(response.data["file"])
    assert nothing_written(acme_graph)


def test_oversize_archive_is_400(api, oscar, acme_graph, monkeypatch):
    from feedback import api as feedback_api
    from graphadmin.vault import parse

    monkeypatch.setattr(feedback_api, "MAX_ARCHIVE_BYTES", 1000)
    monkeypatch.setattr(parse, "MAX_ARCHIVE_BYTES", 1000)
    response = post(api(oscar), acme_graph, fixture_zip())
    assert response.status_code == 400 and "larger than" in str(response.data["file"])
    assert nothing_written(acme_graph)


def test_zip_bomb_uncompressed_limit_is_400(api, oscar, acme_graph, monkeypatch):
    from graphadmin.vault import parse

    monkeypatch.setattr(parse, "MAX_UNCOMPRESSED_BYTES", 10_000)
    response = post(api(oscar), acme_graph, fixture_zip({"vault/zeros.md": "0" * 50_000}))
    assert response.status_code == 400 and "unpacks to more than" in str(response.data["file"])
    assert nothing_written(acme_graph)


def test_not_a_zip_and_empty_vault_are_400(api, oscar, acme_graph):
    junk = io.BytesIO(b"not a zip at all")
    junk.name = "vault.zip"
    assert post(api(oscar), acme_graph, junk).status_code == 400
    empty = io.BytesIO()
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("image.png", b"png")
    empty.seek(0)
    empty.name = "empty.zip"
    response = post(api(oscar), acme_graph, empty)
    assert response.status_code == 400 and "no markdown notes" in str(response.data["file"])
    assert nothing_written(acme_graph)


def test_missing_file_is_400(api, oscar, acme_graph):
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/import/", {}, format="multipart")
    assert response.status_code == 400 and "file" in response.data
