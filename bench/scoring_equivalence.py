"""The retrieval of this checkout against a reference revision's, on the same graph: the same candidates?

    .venv/bin/python -m bench.scoring_equivalence                  # against main, on make run's demo graph
    .venv/bin/python -m bench.scoring_equivalence --ref HEAD~3     # any revision

Imports the reference revision's ``ranking/scoring.py``, ``retrieval.py`` and ``queries.py`` (``git show``)
as a package of their own beside this checkout's ``ranking``, then runs both pipelines' ``retrieve`` in one
process, one after the other, on the same database, the same ``now`` and the same policy, for every question
of the load test and a few variants (a persona, anchors, start nodes, exclusions, reciprocal-rank fusion,
no lexical side). For every candidate it compares, bit for bit: the rank, node, entry, path, hops, total
(``float.hex``), and the features and components the candidate log stores, encoded as the log encodes them
(ranking.queries' msgspec encoder: the same bytes). Prints one line per case and exits 1 on any difference.
Writes nothing.

``--rounds N`` also times both, paired: N rounds over the load test's questions, the reference and this
checkout alternating call by call (question embedded once beforehand), CPU time of this process per call
(``time.process_time``: the Python of retrieval and of the candidate log's features and components dicts,
SQL client side included, the database's own CPU not), the median of the rounds.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.loadtest import load_questions, setup_django

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_MODULES = ("scoring", "retrieval", "queries")


def reference_package(rev: str, into: Path):
    """The reference revision's ranking modules, importable as ``ranking_reference``."""
    package = into / "ranking_reference"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in REFERENCE_MODULES:
        text = subprocess.run(
            ["git", "show", f"{rev}:ranking/{name}.py"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, str(into))
    return importlib.import_module("ranking_reference.retrieval")


def retrieved(module, graph, fields: dict, *, policy, now=None, qvec=None):
    """``retrieve`` of either side on one request: a revision whose stages take a prepared request
    (``retrieval.prepare``) or one from before, whose ``retrieve`` took the request's fields as keywords."""
    if hasattr(module, "prepare"):
        request = module.RetrievalRequest(**fields)
        return module.retrieve(module.prepare(graph, request, now=now, policy=policy, qvec=qvec))
    return module.retrieve(graph, now=now, policy=policy, qvec=qvec, **fields)


def log_rows(items, encode) -> list[tuple]:
    """What the candidate log stores of each candidate, plus what the answer shows (entry, path)."""
    rows = []
    for item in items:
        rows.append(
            (
                item.rank,
                item.node_id,
                item.entry,
                tuple(item.path),
                item.scored.candidate.hops,
                item.scored.total.hex(),
                encode(item.features()),
                encode(item.scored.components_dict()),
            )
        )
    return rows


def cases(questions: list[str], graph) -> list[tuple[str, dict, dict]]:
    """(name, request fields, policy changes): every question as the load test asks it, and variants."""
    from graphadmin.models import Node

    some = list(Node.objects.filter(graph=graph, archived=False).order_by("pk").values_list("pk", flat=True)[:40])
    out = [(f"q{i}", {"query": q, "k": 50}, {}) for i, q in enumerate(questions)]
    for i, q in enumerate(questions[:6]):
        out.append((f"q{i}+persona", {"query": q, "persona": {"decision": 0.8, "Runbook": 0.5}}, {}))
        out.append((f"q{i}+anchors", {"query": q, "anchors": some[i : i + 3]}, {}))
        out.append((f"q{i}+start", {"query": q, "start_nodes": some[i + 3 : i + 5], "exclude": some[i : i + 2]}, {}))
        out.append((f"q{i}+rrf", {"query": q}, {"rrf_k": 60}))
        out.append((f"q{i}+path,hops", {"query": q, "hops": 1}, {"coef_path": 0.3, "exploration": 0.0}))
        out.append((f"q{i}-lexical", {"query": q}, {"coef_lexical": 0.0, "coef_memory": 0.0}))
    out.append(("start only", {"start_nodes": some[:3]}, {}))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", default="main", help="The reference revision (default: main).")
    parser.add_argument("--org", default="demo")
    parser.add_argument("--graph", default="demo")
    parser.add_argument("--rounds", type=int, default=0, help="Also time both pipelines, paired, over N rounds.")
    args = parser.parse_args(argv)
    setup_django()

    from graphadmin.models import Graph
    from ranking import queries, retrieval

    graph = Graph.objects.get(organization__slug=args.org, slug=args.graph)
    encode = queries._encode_json
    now = datetime.now(UTC)
    differences = 0
    with tempfile.TemporaryDirectory() as tmp:
        reference = reference_package(args.ref, Path(tmp))
        revision, _ = retrieval.policy_of(graph)
        for name, fields, changes in cases(load_questions(), graph):
            results = []
            for module in (reference, retrieval):
                policy = module.scoring.Policy.from_mapping(revision.numbers()).with_changes(changes)
                result = retrieved(module, graph, fields, now=now, policy=(revision, policy))
                results.append(log_rows(result.items, encode))
            before, after = results
            same = before == after
            differences += not same
            first = next((b for b, a in zip(before, after, strict=False) if b != a), None)
            print(
                f"{'same' if same else 'DIFFERENT'}  {name}: {len(before)} candidates" + ("" if same else f"; {first}")
            )
        print(f"{differences} case(s) differ" if differences else "all cases identical")
        if args.rounds:
            timing(reference, retrieval, graph, revision, args.rounds)
    return 1 if differences else 0


def timing(reference, retrieval, graph, revision, rounds: int) -> None:
    """CPU ms per retrieve call of the reference and of this checkout, alternating call by call."""
    questions = load_questions()
    vectors = {q: retrieval.query_vector(q, None, graph) for q in questions}
    policies = [(revision, m.scoring.Policy.from_mapping(revision.numbers())) for m in (reference, retrieval)]
    per_round: list[list[float]] = [[], []]
    for _ in range(rounds + 1):  # the first round warms up and is not counted
        spent = [0.0, 0.0]
        for q in questions:
            for side, module in enumerate((reference, retrieval)):
                start = time.process_time()
                items = retrieved(module, graph, {"query": q, "k": 50}, policy=policies[side], qvec=vectors[q]).items
                for item in items:  # what the candidate log stores of each (ranking.context)
                    item.features(), item.scored.components_dict()
                spent[side] += time.process_time() - start
        for side in (0, 1):
            per_round[side].append(spent[side] / len(questions) * 1000)
    before, after = (statistics.median(r[1:]) for r in per_round)
    print(
        f"retrieve CPU per call, median of {rounds} rounds x {len(questions)} questions: reference {before:.2f} ms, "
        f"this checkout {after:.2f} ms ({before / after:.2f}x)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
