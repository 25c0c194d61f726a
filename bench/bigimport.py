"""The large vault archive again (issue 41, item 6): imported for real with its memory measured, and an
import killed halfway through writing, leaving nothing of it in the graph.

    python -m bench.bigimport [--notes 960] [--signal KILL] [--keep]

1. Generates the archive (never committed): ``--notes`` markdown notes of ``480 MiB / notes`` each (960 of
   512 KiB: 480 MiB unpacked, the import's cap is 500 MiB), each with front matter, a heading, wikilinks to
   three other notes and paragraphs of words, deflated (the import refuses an archive over 50 MiB packed).
   Also a stored (uncompressed) zip of the same notes, 480 MiB packed, to show how it is refused.
2. ``manage.py import_vault`` of it into a fresh graph, under ``/usr/bin/time -v`` (its peak resident set
   size, "Maximum resident set size"), embeddings left to the Celery task (``--embed task --no-wait``, no
   worker takes them here: the figure is the import's own). The database: the bench database
   (``bench.common``), on the embedded server or DATABASE_URL.
3. The same import into a second graph, killed (``--signal``, KILL by default) once its transaction has written
   half the bytes the first import added to the nodes' table (``pg_total_relation_size`` counts rows not yet
   committed); then the database is checked: no node, edge, batch or audit event of that graph.
4. The 480 MiB stored zip through the command: refused, with its peak RSS.

Prints one line per step and a JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bench.common import BENCH_DATABASE, ROOT, setup_django

MIB = 1024 * 1024
TOTAL = 480 * MIB
OUT = ROOT / ".local" / "bench-bigimport"
ORG = "bigimport"


def _words(rng: random.Random, count: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(count)]


def generate(notes: int, path: Path, compression: int) -> Path:
    """The vault as a zip at ``path`` (made once per size and compression): ``notes`` notes adding up to 480 MiB."""
    if path.exists():
        return path
    rng = random.Random(41)
    vocabulary = _words(rng, 5000)
    # A pool of paragraphs, so the deflated archive stays under the import's 50 MiB; each note also gets
    # sentences of its own (its text is not another note's).
    pool = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(60, 120))) + ".\n\n" for _ in range(16)]
    size = TOTAL // notes
    tmp = path.with_suffix(".part")
    with zipfile.ZipFile(tmp, "w", compression=compression, compresslevel=9 if compression else None) as archive:
        for i in range(notes):
            links = " ".join(f"[[note-{(i * 7 + k) % notes}]]" for k in (1, 2, 3))
            head = f"---\ntags: [bench, part-{i % 12}]\n---\n# Note {i}\n\nSee {links}.\n\n"
            parts, length = [head], len(head)
            while length < size:
                # A sentence of its own, then paragraphs of the pool (within deflate's 32 KiB window).
                own = " ".join(rng.choice(vocabulary) for _ in range(12)) + f" (note {i}).\n\n"
                for piece in (own, *(pool[rng.randrange(len(pool))] for _ in range(16))):
                    parts.append(piece)
                    length += len(piece)
            archive.writestr(f"Vault/note-{i}.md", "".join(parts)[:size])
    tmp.rename(path)
    return path


def _peak_rss_kb(stderr: str) -> int:
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    return int(found.group(1)) if found else -1


def _command(archive: Path, graph: str) -> list[str]:
    return [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "manage.py",
        "import_vault",
        str(archive),
        "--graph",
        graph,
        "--org",
        ORG,
        "--embed",
        "task",
        "--no-wait",
        "--no-progress",
    ]


def _env(queue_dir: str) -> dict:
    env = dict(os.environ, DATABASE_NAME=BENCH_DATABASE, LOG_LEVEL="WARNING")
    env.setdefault("SECRET_KEY", "bench-only-insecure-key")
    # The embeddings task goes to a queue no worker reads: the figures are the import's own.
    env["CELERY_QUEUE_DIR"] = queue_dir
    return env


def _graph_state(slug: str) -> dict:
    from feedback.models import UpdateBatch
    from graphadmin.models import AuditEvent, Edge, Graph, Node

    graph = Graph.objects.filter(organization__slug=ORG, slug=slug).first()
    if graph is None:
        return {"graph": False, "nodes": 0, "edges": 0, "batches": 0, "audit_imports": 0}
    return {
        "graph": True,
        "nodes": Node.objects.filter(graph=graph).count(),
        "edges": Edge.objects.filter(graph=graph).count(),
        "batches": UpdateBatch.objects.filter(graph=graph, kind="import").count(),
        "audit_imports": AuditEvent.objects.filter(action="graph.import", scope__graph=graph.pk).count(),
    }


def _node_table_bytes() -> int:
    from django.db import connection

    from graphadmin.models import Node

    with connection.cursor() as cur:
        cur.execute("SELECT pg_total_relation_size(%s::regclass)", [Node._meta.db_table])
        return cur.fetchone()[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=960)
    parser.add_argument("--signal", default="KILL", choices=["KILL", "TERM", "INT"])
    args = parser.parse_args(argv)

    setup_django()
    from graphadmin.models import Organization

    OUT.mkdir(parents=True, exist_ok=True)
    clock = time.perf_counter()
    deflated = generate(args.notes, OUT / f"vault-{args.notes}-deflated.zip", zipfile.ZIP_DEFLATED)
    stored = generate(args.notes, OUT / f"vault-{args.notes}-stored.zip", zipfile.ZIP_STORED)
    with zipfile.ZipFile(deflated) as z:
        unpacked = sum(i.file_size for i in z.infolist())
    print(
        f"archives: {deflated.stat().st_size:,} bytes deflated, {stored.stat().st_size:,} stored, "
        f"{unpacked:,} unpacked, {args.notes} notes ({time.perf_counter() - clock:.0f} s)",
        flush=True,
    )

    # Each run imports into graphs of its own (named by the time), in the bench database's organization.
    Organization.objects.get_or_create(slug=ORG, defaults={"name": "Big import bench"})
    stamp = time.strftime("%H%M%S")
    full, cancelled = f"full-{stamp}", f"cancelled-{stamp}"
    queue_dir = tempfile.mkdtemp(prefix="bench-bigimport-queue-")
    env = _env(queue_dir)

    # 2. The whole import, measured.
    before = _node_table_bytes()
    clock = time.perf_counter()
    run = subprocess.run(_command(deflated, full), cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - clock
    grown = _node_table_bytes() - before
    result = {
        "notes": args.notes,
        "deflated_bytes": deflated.stat().st_size,
        "stored_bytes": stored.stat().st_size,
        "unpacked_bytes": unpacked,
        "import": {
            "exit": run.returncode,
            "seconds": round(seconds, 1),
            "peak_rss_mb": round(_peak_rss_kb(run.stderr) / 1024, 1),
            "node_table_growth_mb": round(grown / MIB, 1),
            **_graph_state(full),
        },
    }
    print(f"import: {json.dumps(result['import'])}", flush=True)
    if run.returncode != 0:
        print(run.stdout[-2000:], run.stderr[-4000:], file=sys.stderr)

    # 3. The same import, killed once its transaction has written half of what the first one added.
    before = _node_table_bytes()
    proc = subprocess.Popen(
        _command(deflated, cancelled)[2:], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    clock = time.perf_counter()
    written = 0
    while proc.poll() is None:
        written = _node_table_bytes() - before
        if written >= grown / 2:
            proc.send_signal(getattr(signal, f"SIG{args.signal}"))
            break
        time.sleep(0.05)
    killed_at = time.perf_counter() - clock
    proc.wait()
    # The killed client's backend notices, aborts the transaction and ends: wait for it.
    from django.db import connection

    for _ in range(600):
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND state <> 'idle' AND backend_type = 'client backend'"
            )
            if cur.fetchone()[0] == 0:
                break
        time.sleep(0.1)
    result["cancelled"] = {
        "signal": args.signal,
        "exit": proc.returncode,
        "killed_after_s": round(killed_at, 1),
        "written_mb_when_killed": round(written / MIB, 1),
        **_graph_state(cancelled),
    }
    print(f"cancelled: {json.dumps(result['cancelled'])}", flush=True)

    # 4. The 480 MiB stored zip: refused by the archive cap, and how much memory that took.
    run = subprocess.run(_command(stored, f"stored-{stamp}"), cwd=ROOT, env=env, capture_output=True, text=True)
    result["stored_zip"] = {
        "exit": run.returncode,
        "peak_rss_mb": round(_peak_rss_kb(run.stderr) / 1024, 1),
        "error": next((line for line in run.stderr.splitlines() if "archive" in line.lower()), ""),
    }
    print(f"stored zip: {json.dumps(result['stored_zip'])}", flush=True)
    print(json.dumps(result))
    ok = (
        result["import"]["exit"] == 0
        and result["import"]["nodes"] == args.notes
        and result["cancelled"]["nodes"] == 0
        and result["cancelled"]["edges"] == 0
        and result["cancelled"]["batches"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
