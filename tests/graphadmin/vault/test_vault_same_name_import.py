"""Importing a vault with two notes of one name: edges follow Obsidian, moves keep nodes, reports group by reason."""

import io
import shutil
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command

from feedback.imports import do_import_vault
from feedback.models import UpdateBatch, WeightHistory
from graphadmin.models import Edge, EdgeType, Node
from graphadmin.vault.parse import parse_vault

SAMENAME = Path(__file__).resolve().parents[2] / "fixtures" / "samename_vault"


@pytest.fixture
def vault(tmp_path):
    path = tmp_path / "vault"
    shutil.copytree(SAMENAME, path)
    return path


def run(graph, path, **kwargs):
    return do_import_vault(graph, parse_vault(path), actor="command:test", **kwargs)


def edges(graph, archived=False):
    return {
        (e.source.key, e.target.key, e.edge_type.name)
        for e in Edge.objects.filter(graph=graph, archived=archived).select_related("source", "target", "edge_type")
    }


def standup_links(graph):
    return {(s, t) for s, t, n in edges(graph) if t.endswith("/Standup") and n == "related" and s != "Org/Fields"}


def test_first_import_resolves_each_bare_name_to_the_note_beside_it(acme_graph, vault):
    result = run(acme_graph, vault)
    assert standup_links(acme_graph) == {
        ("Team A/Week 1", "Team A/Standup"),
        ("Team B/Week 1", "Team B/Standup"),
        ("Org/Overview", "Team A/Standup"),  # [[Team A/Standup]], the exact path; its bare [[Standup]] is a tie
    }
    assert ("Org/Fields", "Team A/Standup", "decided_by") in edges(acme_graph)
    assert ("Org/Fields", "Team B/Week 1", "depends_on") in edges(acme_graph)
    assert {"decided_by", "depends_on", "blocks", "supersedes", "informs"} <= set(
        EdgeType.objects.filter(graph=acme_graph).values_list("name", flat=True)
    )
    conventions = Node.objects.get(graph=acme_graph, key="Org/Conventions")
    assert conventions.tags == ["planning", "in-title", "status/active", "review", "decision", "y1984", "one", "two"]

    batch = UpdateBatch.objects.get(pk=result.batch_id)
    assert batch.details["counts"]["unresolved_links"] == 3 and batch.details["counts"]["attachment_links"] == 1
    assert batch.details["unresolved_by_reason"] == [
        {
            "reason": "no such note",
            "count": 1,
            "links": [
                {
                    "source": "Org/Overview",
                    "target": "Retro",
                    "edge_type": "related",
                    "reason": "no such note",
                    "candidates": [],
                }
            ],
        },
        {
            "reason": "ambiguous",
            "count": 1,
            "links": [
                {
                    "source": "Org/Overview",
                    "target": "Standup",
                    "edge_type": "related",
                    "reason": "ambiguous",
                    "candidates": ["Team A/Standup", "Team B/Standup"],
                }
            ],
        },
        {
            "reason": "attachment missing",
            "count": 1,
            "links": [
                {
                    "source": "Org/Overview",
                    "target": "org-chart.png",
                    "edge_type": "related",
                    "reason": "attachment missing",
                    "candidates": [],
                }
            ],
        },
    ]
    assert len(batch.details["unresolved"]) == 3  # the flat list stays


def test_unchanged_reimport_is_a_no_op(acme_graph, vault):
    run(acme_graph, vault)
    nodes_before = dict(Node.objects.filter(graph=acme_graph).values_list("pk", "updated_at"))
    edges_before = dict(Edge.objects.filter(graph=acme_graph).values_list("pk", "updated_at"))
    c = run(acme_graph, vault).counts
    assert (c["nodes_created"], c["nodes_updated"], c["nodes_renamed"], c["nodes_archived"]) == (0, 0, 0, 0)
    assert (c["edges_created"], c["edges_archived"], c["edges_restored"]) == (0, 0, 0)
    assert dict(Node.objects.filter(graph=acme_graph).values_list("pk", "updated_at")) == nodes_before
    assert dict(Edge.objects.filter(graph=acme_graph).values_list("pk", "updated_at")) == edges_before


def test_moving_one_standup_into_the_third_folder(acme_graph, vault):
    run(acme_graph, vault)
    b_standup = Node.objects.get(graph=acme_graph, key="Team B/Standup")
    b_link = Edge.objects.get(source__key="Team B/Week 1", target=b_standup)
    Edge.objects.filter(pk=b_link.pk).update(weight=0.77)  # learned, as the feedback actions would leave it

    (vault / "Team B" / "Standup.md").rename(vault / "Org" / "Standup.md")
    result = run(acme_graph, vault)
    c = result.counts
    moved = Node.objects.get(graph=acme_graph, key="Org/Standup")
    assert moved.pk == b_standup.pk and c["nodes_renamed"] == 1 and c["nodes_created"] == 0
    assert standup_links(acme_graph) == {
        ("Team A/Week 1", "Team A/Standup"),
        # From Team B, neither Standup is beside the link: Org/Standup is the shorter path. Same node, same edge.
        ("Team B/Week 1", "Org/Standup"),
        # From Org, the moved note is now the one beside the link: the tie is resolved.
        ("Org/Overview", "Org/Standup"),
        ("Org/Overview", "Team A/Standup"),
    }
    b_link.refresh_from_db()
    assert (b_link.archived, b_link.weight, b_link.target_id) == (False, 0.77, moved.pk)
    # Fields' [[Team B/Standup]] names a path that is gone.
    assert edges(acme_graph, archived=True) == {("Org/Fields", "Org/Standup", "related")}
    assert {(u["target"], u["reason"]) for u in result.unresolved} == {
        ("Retro", "no such note"),
        ("Team B/Standup", "no such note"),
        ("org-chart.png", "attachment missing"),
    }
    assert (c["edges_created"], c["edges_archived"]) == (1, 1)
    assert not WeightHistory.objects.exists()
    again = run(acme_graph, vault).counts
    assert (again["nodes_updated"], again["nodes_renamed"], again["edges_created"], again["edges_archived"]) == (
        0,
        0,
        0,
        0,
    )


def test_moving_one_standup_to_a_folder_as_far_from_both(acme_graph, vault):
    run(acme_graph, vault)
    (vault / "Team C").mkdir()
    (vault / "Team B" / "Standup.md").rename(vault / "Team C" / "Standup.md")
    result = run(acme_graph, vault)
    # Team B's [[Standup]] is now a true tie (Team A/ and Team C/ are as long): its edge is archived.
    assert ("Team B/Week 1", "Team C/Standup", "related") in edges(acme_graph, archived=True)
    ambiguous = sorted((u["source"], tuple(u["candidates"])) for u in result.unresolved if u["reason"] == "ambiguous")
    assert ambiguous == [
        ("Org/Overview", ("Team A/Standup", "Team C/Standup")),
        ("Team B/Week 1", ("Team A/Standup", "Team C/Standup")),
    ]
    assert ("Team A/Week 1", "Team A/Standup") in standup_links(acme_graph)


def test_tags_read_by_a_newer_parser_update_the_node_without_a_new_vector(acme_graph, vault):
    run(acme_graph, vault)
    node = Node.objects.filter(graph=acme_graph, key="Org/Conventions")
    # As imported before body tags were read; a marker vector shows whether the import re-embeds.
    marker = [0.0] * (len(node.get().embedding) - 1) + [1.0]
    node.update(tags=["planning"], embedding=marker)
    vector, before = list(node.get().embedding), node.get().updated_at
    c = run(acme_graph, vault).counts
    assert c["nodes_updated"] == 1 and c["edges_created"] == 0
    after = node.get()
    assert after.tags[-1] == "two" and list(after.embedding) == vector and after.updated_at > before
    assert run(acme_graph, vault).counts["nodes_updated"] == 0


def test_command_summary_groups_unresolved_links_by_reason(acme_graph, vault, capsys):
    call_command("import_vault", str(vault), "--graph", "memory", "--org", "acme")
    out = capsys.readouterr().out
    assert (
        "  unresolved links: 3\n"
        "    no such note (1):\n"
        "      Org/Overview: [[Retro]] (related)\n"
        "    ambiguous (1):\n"
        "      Org/Overview: [[Standup]] (related): Team A/Standup or Team B/Standup\n"
        "    attachment missing (1):\n"
        "      Org/Overview: [[org-chart.png]] (related)\n"
    ) in out


def test_api_returns_the_groups(api, oscar, acme_graph):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path in sorted(SAMENAME.rglob("*")):
            if path.is_file():
                zf.write(path, "vault/" + path.relative_to(SAMENAME).as_posix())
    buf.seek(0)
    buf.name = "vault.zip"
    body = (
        api(oscar)
        .post(f"/api/graphs/{acme_graph.pk}/import/", {"file": buf, "dry_run": "true"}, format="multipart")
        .json()
    )
    assert [(g["reason"], g["count"]) for g in body["unresolved_by_reason"]] == [
        ("no such note", 1),
        ("ambiguous", 1),
        ("attachment missing", 1),
    ]
    assert body["unresolved_by_reason"][1]["links"][0]["candidates"] == ["Team A/Standup", "Team B/Standup"]
    assert len(body["unresolved"]) == 3
