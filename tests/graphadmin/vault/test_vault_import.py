"""Importing the fixture vault into a graph, then re-importing after an edit, a rename and a deletion."""

import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from feedback.imports import do_import_vault
from feedback.models import UpdateBatch, WeightHistory
from graphadmin.models import AuditEvent, Edge, EdgeType, Node
from graphadmin.vault.parse import parse_vault

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "vault"


@pytest.fixture
def vault(tmp_path):
    path = tmp_path / "vault"
    shutil.copytree(FIXTURE, path)
    return path


def run(graph, path, actor="command:test", **kwargs):
    return do_import_vault(graph, parse_vault(path), actor=actor, **kwargs)


def edge_set(graph, archived=False):
    return {
        (e.source.key, e.target.key, e.edge_type.name)
        for e in Edge.objects.filter(graph=graph, archived=archived).select_related("source", "target", "edge_type")
    }


def test_first_import_creates_nodes_edges_batch_and_audit(acme_graph, vault, oscar):
    result = run(acme_graph, vault, actor=oscar)
    c = result.counts
    assert (c["nodes_created"], c["edges_created"], c["unresolved_links"], c["edge_types_created"]) == (9, 22, 2, 1)
    assert (c["nodes_updated"], c["nodes_archived"], c["edges_archived"], c["files_skipped"]) == (0, 0, 0, 1)
    home = Node.objects.get(graph=acme_graph, key="Home")
    assert (home.title, home.kind, home.source, home.aliases, home.tags) == (
        "Vault home",
        "note",
        "vault:Home.md",
        ["Start", "Index"],
        ["hub", "overview"],
    )
    assert home.embedding is not None and len(home.embedding) == 384
    assert not Node.objects.filter(graph=acme_graph, embedding__isnull=True).exists()
    assert not Edge.objects.filter(graph=acme_graph, triplet_embedding__isnull=True).exists()
    assert ("Decisions/Retry Policy", "Research/Caching Study", "derived_from") in edge_set(acme_graph)
    implements = EdgeType.objects.get(graph=acme_graph, name="implements")
    assert implements.priority == 0.0
    assert Edge.objects.filter(graph=acme_graph, weight=0.5, feedback_weight=0.5).count() == 22

    batch = UpdateBatch.objects.get(graph=acme_graph, kind="import")
    assert batch.trigger_user == oscar and batch.details["counts"] == c
    assert {u["target"] for u in batch.details["unresolved"]} == {"Ghost Note", "Old Retry Policy"}
    assert batch.details["warnings"] == result.warnings
    event = AuditEvent.objects.get(organization=acme_graph.organization, action="graph.import")
    assert event.payload["counts"] == c and event.payload["batch"] == batch.pk and event.actor == "user:oscar"
    assert not WeightHistory.objects.exists()


def test_unchanged_reimport_touches_nothing(acme_graph, vault):
    run(acme_graph, vault)
    before = {n.pk: (n.updated_at, n.key) for n in Node.objects.filter(graph=acme_graph)}
    edges_before = {e.pk: e.updated_at for e in Edge.objects.filter(graph=acme_graph)}
    result = run(acme_graph, vault)
    c = result.counts
    assert (c["nodes_created"], c["nodes_updated"], c["nodes_renamed"], c["nodes_archived"], c["nodes_unchanged"]) == (
        0,
        0,
        0,
        0,
        9,
    )
    assert (c["edges_created"], c["edges_archived"], c["edges_restored"], c["edges_unchanged"]) == (0, 0, 0, 22)
    assert {n.pk: (n.updated_at, n.key) for n in Node.objects.filter(graph=acme_graph)} == before
    assert {e.pk: e.updated_at for e in Edge.objects.filter(graph=acme_graph)} == edges_before
    assert UpdateBatch.objects.filter(graph=acme_graph, kind="import").count() == 2
    assert AuditEvent.objects.filter(action="graph.import").count() == 2
    assert not WeightHistory.objects.exists()


def test_reimport_after_edit_rename_and_deletion(acme_graph, vault):
    run(acme_graph, vault)
    queue = Node.objects.get(graph=acme_graph, key="Components/Queue")
    store = Node.objects.get(graph=acme_graph, key="Components/Store")
    alpha = Node.objects.get(graph=acme_graph, key="Projects/Alpha/Plan")
    weekly = Node.objects.get(graph=acme_graph, key="Meeting Notes/Weekly Sync")
    # Learned weights on a surviving edge (as the feedback actions would have left them).
    learned = Edge.objects.get(source=queue, target=store)
    Edge.objects.filter(pk=learned.pk).update(weight=0.83, feedback_weight=0.61)
    old_vector = list(weekly.embedding)
    untouched_at = Node.objects.get(graph=acme_graph, key="Home").updated_at
    old_triplet = list(Edge.objects.get(source=queue, target=store).triplet_embedding)

    # Edit: Weekly Sync gets new text and drops its link to the queue.
    (vault / "Meeting Notes" / "Weekly Sync.md").write_text("Discussed the [[Retry Policy]] and capacity planning.\n")
    # Rename with unchanged content: Components/Store -> Components/Datastore (links to it still say [[Store]]
    # through the alias 'Storage' and the name, so point them at the new name as Obsidian would).
    (vault / "Components" / "Store.md").rename(vault / "Components" / "Datastore.md")
    for note in ("Architecture.md", "Components/Queue.md", "Decisions/Retry Policy.md"):
        p = vault / note
        p.write_text(
            p.read_text()
            .replace("[[Store]]", "[[Datastore]]")
            .replace("[[Components/Store]]", "[[Components/Datastore]]")
        )
    # Deletion: Alpha's plan is gone (Beta linked to it).
    (vault / "Projects" / "Alpha" / "Plan.md").unlink()

    result = run(acme_graph, vault)
    c = result.counts
    assert c["nodes_created"] == 0 and c["nodes_renamed"] == 1 and c["nodes_archived"] == 1
    # Weekly Sync edited; Architecture, Queue and Retry Policy had their links rewritten.
    assert c["nodes_updated"] == 4
    datastore = Node.objects.get(graph=acme_graph, key="Components/Datastore")
    assert (
        datastore.pk == store.pk
        and datastore.title == "Datastore"
        and datastore.source == "vault:Components/Datastore.md"
    )
    assert not Node.objects.filter(graph=acme_graph, key="Components/Store").exists()
    alpha.refresh_from_db()
    assert alpha.archived and Node.objects.filter(pk=alpha.pk).exists()
    weekly.refresh_from_db()
    assert list(weekly.embedding) != old_vector and "capacity planning" in weekly.text

    learned.refresh_from_db()
    assert (learned.weight, learned.feedback_weight, learned.archived) == (0.83, 0.61, False)
    archived = edge_set(acme_graph, archived=True)
    assert archived == {
        ("Meeting Notes/Weekly Sync", "Components/Queue", "related"),
        ("Projects/Alpha/Plan", "Components/Queue", "related"),
        ("Projects/Beta/Plan", "Projects/Alpha/Plan", "related"),
    }
    # Home's [[Plan]] named Beta's plan (the shorter path) before Alpha's went, and still does.
    assert c["edges_archived"] == 3 and c["edges_created"] == 0
    assert ("Home", "Projects/Beta/Plan", "related") in edge_set(acme_graph)
    assert {u["target"] for u in result.unresolved} == {
        "Ghost Note",
        "Old Retry Policy",
        "Projects/Alpha/Plan",
        "Alpha/Plan",
    }
    assert Node.objects.get(graph=acme_graph, key="Home").updated_at == untouched_at
    # The renamed node's edges got new triplet text, and were not recreated.
    assert Edge.objects.filter(graph=acme_graph).count() == 22
    triplet = Edge.objects.get(source=queue, target=store)
    assert list(triplet.triplet_embedding) != old_triplet  # "Queue -> related -> Datastore" now
    assert not WeightHistory.objects.exists()
    assert result.batch_id and UpdateBatch.objects.get(pk=result.batch_id).details["renamed"] == {
        "Components/Datastore": "Components/Store"
    }


def test_deleted_note_that_returns_is_restored_with_its_edges(acme_graph, vault):
    run(acme_graph, vault)
    queue_edges = Edge.objects.filter(graph=acme_graph, source__key="Components/Queue")
    queue_edges.update(weight=0.9)
    text = (vault / "Components" / "Queue.md").read_bytes()
    (vault / "Components" / "Queue.md").unlink()
    gone = run(acme_graph, vault).counts
    assert gone["nodes_archived"] == 1 and gone["edges_archived"] == 7  # 2 out, 5 in
    (vault / "Components" / "Queue.md").write_bytes(text)
    back = run(acme_graph, vault).counts
    assert back["nodes_updated"] == 1 and back["edges_restored"] == 7 and back["edges_created"] == 0
    assert set(
        Edge.objects.filter(graph=acme_graph, source__key="Components/Queue").values_list("weight", flat=True)
    ) == {0.9}
    assert not Edge.objects.filter(graph=acme_graph, archived=True).exists()


def test_nodes_made_through_the_api_are_left_alone(acme_graph, vault):
    mine = Node.objects.create(graph=acme_graph, key="agent/observation", title="An observation", source="agent:x")
    run(acme_graph, vault)
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    home = Node.objects.get(graph=acme_graph, key="Home")
    Edge.objects.create(graph=acme_graph, source=mine, target=home, edge_type=related)
    run(acme_graph, vault)
    mine.refresh_from_db()
    assert not mine.archived and Edge.objects.get(source=mine).archived is False


def test_dry_run_writes_nothing(acme_graph, vault):
    result = run(acme_graph, vault, dry_run=True)
    assert result.dry_run and result.counts["nodes_created"] == 9 and result.counts["edges_created"] == 22
    assert not Node.objects.filter(graph=acme_graph).exists()
    assert not UpdateBatch.objects.exists() and not AuditEvent.objects.filter(action="graph.import").exists()
    assert not EdgeType.objects.filter(graph=acme_graph, name="implements").exists()


def test_create_missing_makes_placeholder_nodes(acme_graph, vault):
    result = do_import_vault(acme_graph, parse_vault(vault, create_missing=True), actor="command:test")
    assert result.counts["placeholders"] == 2 and result.counts["unresolved_links"] == 0
    ghost = Node.objects.get(graph=acme_graph, key="Ghost Note")
    assert ghost.kind == "missing" and ghost.source.startswith("vault-missing:")
    assert EdgeType.objects.filter(graph=acme_graph, name="supersedes", priority=0.0).exists()


def test_import_is_set_based(acme_graph, vault, tmp_path):
    # Ten times the notes must not mean ten times the queries.
    big = tmp_path / "big"
    big.mkdir()
    for i in range(200):
        (big / f"n{i}.md").write_text(
            f"Note {i} about topic {i % 7}. [[n{(i + 1) % 200}]] depends_on:: [[n{(i + 3) % 200}]]\n"
        )
    small = tmp_path / "small"
    small.mkdir()
    for i in range(20):
        (small / f"n{i}.md").write_text(f"Note {i}. [[n{(i + 1) % 20}]]\n")
    with CaptureQueriesContext(connection) as q_small:
        run(acme_graph, small)
    from graphadmin import actions

    other = actions.do_create_graph(acme_graph.organization, "other", "Other", actor="command:test")
    with CaptureQueriesContext(connection) as q_big:
        run(other, big)
    assert len(q_big) <= len(q_small) + 5, (len(q_small), len(q_big))


def test_command_reports_counts_and_unresolved(acme_graph, vault, capsys):
    call_command("import_vault", str(vault), "--graph", "memory", "--org", "acme")
    out = capsys.readouterr()
    assert "9 notes" in out.out and "nodes: 9 created" in out.out and "unresolved links: 2" in out.out
    assert "    no such note (2):\n      Home: [[Ghost Note]] (related)\n" in out.out
    assert "not UTF-8" in out.err
    call_command("import_vault", str(vault), "--graph", "memory", "--org", "acme", "--dry-run")
    assert "Dry run" in capsys.readouterr().out and UpdateBatch.objects.count() == 1


def test_command_shows_progress_bars(acme_graph, vault, capsys):
    call_command("import_vault", str(vault), "--graph", "memory", "--org", "acme", "--progress", "--embed", "sync")
    err = capsys.readouterr().err
    assert "notes read: 100%" in err and "notes linked: 100%" in err and "texts embedded: 100%" in err


def test_command_dry_run_on_a_new_graph_keeps_nothing(acme, vault, capsys):
    from graphadmin.models import Graph

    call_command("import_vault", str(vault), "--graph", "fresh", "--org", "acme", "--dry-run")
    assert "nodes: 9 created" in capsys.readouterr().out
    assert not Graph.objects.filter(slug="fresh").exists() and not AuditEvent.objects.exists()


def test_command_creates_the_graph_and_refuses_bad_paths(acme, tmp_path, vault):
    call_command("import_vault", str(vault), "--graph", "fresh", "--org", "acme")
    assert Node.objects.filter(graph__slug="fresh", graph__organization=acme).count() == 9
    with pytest.raises(CommandError, match="neither a directory nor a zip"):
        (tmp_path / "x.txt").write_text("x")
        call_command("import_vault", str(tmp_path / "x.txt"), "--graph", "fresh", "--org", "acme")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match="no markdown notes"):
        call_command("import_vault", str(tmp_path / "empty"), "--graph", "fresh", "--org", "acme")
    with pytest.raises(CommandError, match="No graph"):
        call_command("import_vault", str(vault), "--graph", "unknown")


@pytest.mark.django_db
def test_the_import_leaves_no_statement_text_in_psycopgs_prepare_count(acme_graph, tmp_path):
    # psycopg keeps the text of the statements it counts towards preparing (its last 100); a run of new nodes
    # is one INSERT with the notes' texts bound into it, a new statement each time, so a large vault's whole
    # text stayed in memory there (docs/resilience.md). The import's statements are neither counted nor prepared.
    root = tmp_path / "big"
    root.mkdir()
    for i in range(3):
        (root / f"note-{i}.md").write_text(f"# Note {i}\n\nSee [[note-{(i + 1) % 3}]].\n\n" + f"word{i} " * 40_000)
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    result = run(acme_graph, root, embed="sync")
    assert result.as_dict()["counts"]["nodes_created"] == 3
    counted = connection.connection._prepared._counts  # psycopg's count of statements seen (private, read only)
    assert max((len(key[0]) for key in counted), default=0) < 100_000
    assert connection.connection.prepare_threshold == threshold  # the connection's setting is back
