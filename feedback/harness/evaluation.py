"""Does the graph learn on the agent's path? A learning graph against its frozen twin, over HTTP only.

``evaluate(client, vault, questions, cfg)`` is what ``manage.py evaluate_learning`` runs against a
running server (``make run``): it uses nothing but the public REST API through
``graphadmin_client.GraphClient``, so it measures exactly what an agent gets. It

1. creates two fresh graphs in the organization (``eval-<run>-learning`` and ``eval-<run>-frozen``),
   imports the vault into both through the import API (zipped in memory) and waits until the graph is
   ready (every node and edge has its embedding, nothing pending in the graph's API answer); applies the
   same ``--set`` policy changes to both;
2. splits the questions into train and test with the seed (a seeded shuffle, no stratification);
3. for round 0..N: asks every question of both graphs with ``context`` (the question only: no
   start nodes, no anchors, a fresh session id per call) and scores the top 5 selected items against
   the question's useful notes; then, in rounds before the last, the simulated agent reports on the
   learning graph's *train* sessions only, and the command waits until the worker has applied every
   report of the round. Round 0 is the measurement before any feedback; round r is measured after r
   rounds of feedback. Test questions are asked, never reported: they measure generalisation (or harm).

The simulated agent is ``agent.agent_turn``; the metrics are ``scoring.score`` (hit@5, recall@5, MRR@5
of the top 5 selected items, distinct notes in rank order), each averaged over the split.

Beside the rounds, on the frozen twin at round 0: the two baselines (``measure_baselines``: plain cosine and
the plain hybrid, cosine + BM25 fused by ``scoring.hybrid_keys``, both over one search of the entry points) and
the ablation (``measure_ablation``: every question asked once more with ``hops: 0``, entry points only). Each
question's row keeps its category, every round's top 5 and recall@5, and how each selected item was reached
(``ways``: the edge type it came through, or None for an entry point), so the report can give every figure per
question category (``report.EvaluationReport.summary``).
"""

from __future__ import annotations

import io
import json
import os
import random
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from graphadmin_client import ApiError, GraphClient

from .agent import agent_turn
from .config import FEEDBACK_MODES, EvaluationConfig, EvaluationError, Question
from .report import GRAPHS, SPLITS, EvaluationReport
from .scoring import METRICS, K, edge_way, hybrid_keys, mean_of, ranked_keys, score

PLAIN_K = 200  # search hits read for the baselines (the API's MAX_SEARCH_K), entry points only (hops 0)
Log = Callable[[str], None]


# --- input ------------------------------------------------------------------------------------------


def zip_vault(path: str | os.PathLike) -> bytes:
    """The vault folder as a zip archive in memory (regular files only; hidden folders such as .obsidian skipped).
    A path that already is a zip file is read as is."""
    root = Path(path)
    if root.is_file():
        return root.read_bytes()
    if not root.is_dir():
        raise EvaluationError(f"{path}: not a folder or a zip file.")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                full = Path(folder) / name
                if name.startswith(".") or full.is_symlink() or not full.is_file():
                    continue
                archive.write(full, full.relative_to(root).as_posix())
    return buffer.getvalue()


def split(n: int, train_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Indexes of the train and test questions: a seeded shuffle, the first ``round(n * fraction)`` are train.

    With 0 < fraction < 1 and at least two questions, both sides get at least one question."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_train = round(n * train_fraction)
    if 0 < train_fraction < 1 and n >= 2:
        n_train = min(max(n_train, 1), n - 1)
    return sorted(order[:n_train]), sorted(order[n_train:])


def plain_cosine_keys(hits: list[dict]) -> list[str]:
    """Plain cosine top 5: search hits ordered by their raw node-vector cosine alone (no other component).

    The search answer's candidates include the node-vector top ``k`` (its entry points), each with
    ``vector_score`` = cosine(question, node embedding); a node without an embedding has none and is
    left out. Ties break by key, so the order is the same on every call."""
    scored = [h for h in hits if h.get("vector_score") is not None]
    scored.sort(key=lambda h: (-h["vector_score"], h["key"]))
    return list(dict.fromkeys(h["key"] for h in scored))


# --- the graphs ------------------------------------------------------------------------------------------


def _setup_graph(client: GraphClient, cfg: EvaluationConfig, slug: str, archive: bytes, cfg_note: str, log) -> dict:
    try:
        graph = client.create_graph(cfg.organization, slug, slug, "Created by manage.py evaluate_learning.")
    except ApiError as exc:
        raise EvaluationError(
            f"creating graph {slug} in '{cfg.organization}' was refused ({exc.status_code}: {exc.errors}); "
            "the token's user needs the admin role there."
        ) from exc
    try:
        result = client.import_vault(graph["id"], archive)
    except ApiError as exc:
        raise EvaluationError(
            f"importing the vault into {slug} was refused ({exc.status_code}: {exc.errors})."
        ) from exc
    log(f"graph {graph['id']} {slug}: imported {result['counts']} (embedding: {result['embedding']})")
    if cfg.policy:
        # The API ignores names it does not know (a partial update): refuse them here instead, so a
        # misspelt --set never measures the defaults while claiming otherwise.
        known = set(client.policy(graph["id"])) - {"revision", "created_at", "created_by", "note"}
        unknown = sorted(set(cfg.policy) - known)
        if unknown:
            raise EvaluationError(f"--set: unknown policy names {unknown}; the server's policy has {sorted(known)}.")
        try:
            revision = client.update_policy(graph["id"], cfg.policy, note=cfg_note)
        except ApiError as exc:
            raise EvaluationError(f"policy change {cfg.policy} refused ({exc.status_code}: {exc.errors}).") from exc
        log(f"graph {graph['id']} {slug}: policy revision {revision['revision']} with {cfg.policy}")
    return {"id": graph["id"], "slug": slug, "import": result}


def pending_of(graph: dict) -> dict[str, int]:
    """The graph API answer's counts of work still pending (every key with ``pending`` in its name and a
    positive whole number: vectors being written, edges being derived, ...), by key."""
    return {
        k: v for k, v in graph.items() if "pending" in k and isinstance(v, int) and not isinstance(v, bool) and v > 0
    }


def _wait_ready(client: GraphClient, graph_id: int, cfg: EvaluationConfig) -> list[dict]:
    """The graph's active nodes, once the graph is ready: every active node and edge has its embedding (a large
    import embeds in a task) and the graph's API answer has nothing pending (``pending_of``)."""
    deadline = time.monotonic() + cfg.wait_timeout
    while True:
        nodes = [n for n in client.nodes(graph_id) if not n["archived"]]
        edges = [e for e in client.edges(graph_id) if not e["archived"]]
        missing = sum(1 for n in nodes if not n.get("embedded", True)) + sum(
            1 for e in edges if not e.get("embedded", True)
        )
        pending = pending_of(client.graph(graph_id))
        if not missing and not pending:
            return nodes
        if time.monotonic() > deadline:
            raise EvaluationError(
                f"graph {graph_id}: not ready after {cfg.wait_timeout:.0f}s ({missing} nodes and edges without "
                f"embeddings; pending {pending or 'nothing'}); is a Celery worker serving the 'embeddings' queue?"
            )
        time.sleep(cfg.poll_interval)


@dataclass
class SentReport:
    """One feedback report of a session, kept until the worker has applied it (its batch carries the key)."""

    session: str
    what: str  # "uses", "response" or "outcome"
    body: object  # the use items, the answer text, or the outcome word
    client_key: str
    server_key: str = ""
    resent: int = 0


def send_report(client: GraphClient, graph_id: int, report: SentReport) -> dict:
    """Send (or resend, with the same idempotency key: it applies once) one report; the API's answer."""
    if report.what == "uses":
        answer = client.record_use(graph_id, report.session, report.body, idempotency_key=report.client_key)
    elif report.what == "response":
        answer = client.record_response(graph_id, report.session, report.body, idempotency_key=report.client_key)
    else:
        answer = client.improve(graph_id, report.session, report.body, idempotency_key=report.client_key)
    report.server_key = answer.get("idempotency_key", report.server_key)
    return answer


def wait_applied(
    client: GraphClient,
    graph_id: int,
    pending: list[SentReport],
    cfg: EvaluationConfig,
    log: Callable[[str], None] = lambda line: None,
) -> dict:
    """Block until every queued report has its applied batch; returns {"wait_s", "resent"}.

    The worker applies reports asynchronously (the filesystem broker delivers about one a second).
    When ``resend_after`` seconds pass with no report applied, the ones left are taken as lost and
    sent again with the same idempotency key, so each applies once however many copies run: a task
    can fail on the worker and is not retried (deadlocks between two feedback tasks of one session
    were seen). Past ``wait_timeout`` it is an error that names a session.

    A response report in which the worker detects no use writes no batch (a logged no-op the API
    does not show): responses are waited for only until every other report is applied and nothing
    more has been applied for ``resend_after`` seconds; ``responses_applied`` counts those that
    wrote a batch (implicit uses detected).
    """
    started = last_progress = time.monotonic()
    resent = 0
    responses = sum(1 for r in pending if r.what == "response")
    responses_left = 0
    by_session: dict[str, list[SentReport]] = {}
    settled: set[int] = set()  # reports whose resend the server refused with 409 (their session settled)
    for report in pending:
        by_session.setdefault(report.session, []).append(report)
    while by_session:
        for session in list(by_session):
            done = {b.get("idempotency_key") for b in client.batches(graph_id, session) if b["status"] == "applied"}
            left = [r for r in by_session[session] if r.server_key not in done]
            if len(left) < len(by_session[session]):
                last_progress = time.monotonic()
            if left:
                by_session[session] = left
            else:
                del by_session[session]
        if not by_session:
            break
        now = time.monotonic()
        left_reports = [r for reports in by_session.values() for r in reports]
        if all(r.what == "response" for r in left_reports) and now - last_progress > cfg.resend_after:
            responses_left = len(left_reports)  # taken as "nothing detected"
            break
        if now - started > cfg.wait_timeout:
            waiting = sum(len(r) for r in by_session.values())
            raise EvaluationError(
                f"graph {graph_id}: {waiting} feedback reports of {len(by_session)} sessions not applied after "
                f"{cfg.wait_timeout:.0f}s (e.g. session {next(iter(by_session))!r}). Is a Celery worker running on the "
                "server's broker (make run starts one)? Its log names a failed task."
            )
        if now - last_progress > cfg.resend_after:
            last_progress = now
            for reports in by_session.values():
                for report in reports:
                    if report.what != "response" and report.resent < cfg.max_resends:
                        report.resent += 1
                        resent += 1
                        log(
                            f"{report.session}: {report.what} report not applied, nothing applied for "
                            f"{cfg.resend_after:.0f}s: sent again (same idempotency key {report.server_key})"
                        )
                        try:
                            send_report(client, graph_id, report)
                        except ApiError as exc:
                            if exc.status_code != 409:
                                raise
                            # The session was settled meanwhile (its outcome applied): the server keeps
                            # what it had; this copy is refused, so nothing more is waited for.
                            log(f"{report.session}: the resent {report.what} report was refused (409): {exc.errors}")
                            settled.add(id(report))
            for session in list(by_session):
                by_session[session] = [r for r in by_session[session] if id(r) not in settled]
                if not by_session[session]:
                    del by_session[session]
        time.sleep(cfg.poll_interval)
    return {
        "wait_s": round(time.monotonic() - started, 2),
        "resent": resent,
        "responses_applied": responses - responses_left,
    }


# --- the run, step by step ------------------------------------------------------------------------------


def check_config(cfg: EvaluationConfig) -> None:
    """Refuse a configuration the run cannot honour, naming the option."""
    if cfg.rounds < 0:
        raise EvaluationError("--rounds must be 0 or more.")
    if not 0.0 <= cfg.train_fraction <= 1.0:
        raise EvaluationError("--train-fraction must be between 0 and 1.")
    if not 0.0 <= cfg.negative_rate <= 1.0:
        raise EvaluationError("--negative-rate must be between 0 and 1.")
    if cfg.feedback not in FEEDBACK_MODES:
        raise EvaluationError(f"--feedback must be one of {', '.join(FEEDBACK_MODES)}.")
    if not 0.0 <= cfg.report_p <= 1.0:
        raise EvaluationError("--report-p must be between 0 and 1.")
    if cfg.report_p < 1.0 and cfg.feedback != "explicit":
        raise EvaluationError("--report-p applies to --feedback explicit (the only mode that reports uses).")


def make_graphs(
    client: GraphClient, vault, questions: list[Question], cfg: EvaluationConfig, run: str, log: Log
) -> dict:
    """Step 1: both graphs created, imported, ready (embedded, nothing pending) and given the policy changes;
    every useful key checked."""
    archive = zip_vault(vault)
    note = f"evaluate_learning {run}: --set {json.dumps(cfg.policy, sort_keys=True)}"
    graphs = {name: _setup_graph(client, cfg, f"eval-{run}-{name}", archive, note, log) for name in GRAPHS}
    keys = {}
    for name, g in graphs.items():
        nodes = _wait_ready(client, g["id"], cfg)
        keys[name] = {n["key"] for n in nodes}
        g["nodes"] = len(nodes)
        g["policy_revision"] = client.policy(g["id"])["revision"]
    unknown = sorted({k for q in questions for k in q.useful} - keys["learning"])
    if unknown:
        raise EvaluationError(
            f"useful note keys not in the imported vault: {unknown[:10]}"
            f"{' ...' if len(unknown) > 10 else ''} (a key is the note's vault path without .md). "
            f"Graphs {graphs['learning']['slug']} and {graphs['frozen']['slug']} were created."
        )
    return graphs


def new_report(
    vault, questions: list[Question], cfg: EvaluationConfig, run: str, graphs: dict, started
) -> EvaluationReport:
    """Step 2: the empty report with the train/test split (a seeded shuffle) and a row per question."""
    train, test = split(len(questions), cfg.train_fraction, cfg.seed)
    is_train = set(train)
    return EvaluationReport(
        config={**asdict(cfg), "vault": str(vault), "k": K, "run": run},
        graphs=graphs,
        train=train,
        test=test,
        questions=[
            {
                "index": i,
                "q": q.q,
                "useful": q.useful,
                "split": "train" if i in is_train else "test",
                "category": q.category,
                "top": {name: [] for name in GRAPHS},
                "recall5": {name: [] for name in GRAPHS},
                "ways": {name: [] for name in GRAPHS},
            }
            for i, q in enumerate(questions)
        ],
        started_at=started.isoformat(),
    )


def _split_means(scores: dict[str, list[dict]]) -> dict:
    """Per split: each metric's mean and the number of questions."""
    return {s: {m: mean_of(scores[s], m) for m in METRICS} | {"n": len(scores[s])} for s in SPLITS}


def measure_baselines(client: GraphClient, questions: list[Question], report: EvaluationReport) -> None:
    """The baselines, asked once of the frozen twin: plain cosine (node vectors alone) and the plain hybrid
    (cosine + BM25, reciprocal-rank fusion of the two raw rankings, ``scoring.hybrid_keys``).

    One search per question with ``hops: 0`` (the entry points: the node-vector and BM25 top ``PLAIN_K``, no
    expansion), read for its hits' ``vector_score`` and ``bm25``. Search logs nothing, so it does not touch the
    frozen twin's history; neither baseline changes between rounds.
    """
    is_train = set(report.train)
    scores: dict[str, dict[str, list[dict]]] = {b: {s: [] for s in SPLITS} for b in ("plain", "hybrid")}
    for i, q in enumerate(questions):
        try:
            hits = client.search(report.graphs["frozen"]["id"], q.q, k=PLAIN_K, hops=0)["results"]
        except ApiError as exc:
            raise EvaluationError(f"search refused on frozen ({exc.status_code}: {exc.errors}).") from exc
        side = "train" if i in is_train else "test"
        for name, ranked in (("plain", plain_cosine_keys(hits)), ("hybrid", hybrid_keys(hits))):
            scored = score(ranked, q.useful)
            scores[name][side].append(scored)
            report.questions[i][f"{name}_top"] = ranked[:K]
            report.questions[i][f"{name}_recall5"] = scored["recall5"]
    report.plain = _split_means(scores["plain"])
    report.hybrid = _split_means(scores["hybrid"])


def measure_ablation(
    client: GraphClient, questions: list[Question], report: EvaluationReport, cfg: EvaluationConfig
) -> None:
    """The ablation: every question asked once more of the frozen twin at round 0 with ``hops: 0`` (entry points
    only, no expansion), a fresh session each; its recall@5 and top 5 go beside round 0's (the default hops)."""
    run, gid = report.config["run"], report.graphs["frozen"]["id"]
    scores: dict[str, list[dict]] = {s: [] for s in SPLITS}
    is_train = set(report.train)
    for i, q in enumerate(questions):
        try:
            ctx = client.context(gid, f"eval-{run}-frozen-hops0-q{i}", q.q, budget=cfg.budget, hops=0)
        except ApiError as exc:
            raise EvaluationError(f"context with hops 0 refused on frozen ({exc.status_code}: {exc.errors}).") from exc
        ranked = ranked_keys(ctx["items"])
        scored = score(ranked, q.useful)
        scores["train" if i in is_train else "test"].append(scored)
        report.questions[i]["hops0_top"] = ranked[:K]
        report.questions[i]["hops0_recall5"] = scored["recall5"]
        report.questions[i]["hops0_ways"] = item_ways(ctx["items"])
    report.hops0 = _split_means(scores)


def item_ways(items: list[dict]) -> list[str | None]:
    """How each selected item of a context answer was reached, in rank order: the edge type it came
    through (``scoring.edge_way``), or None for an entry point."""
    return [edge_way(i) for i in sorted(items, key=lambda i: i["rank"])]


def measure_round(
    client: GraphClient, questions: list[Question], report: EvaluationReport, cfg: EvaluationConfig, r: int
) -> tuple[dict, dict[int, tuple[str, list[dict]]]]:
    """Ask every question of both graphs (a fresh session each) and score the answers: the round's row,
    and the learning graph's train sessions with the items they were given (what the agent reports on).

    Measured before any report of the round is sent: the worker applying this round's feedback must
    not change what later questions of the same round are given.
    """
    run, is_train = report.config["run"], set(report.train)
    scores = {name: {s: [] for s in SPLITS} for name in GRAPHS}
    given: dict[int, tuple[str, list[dict]]] = {}
    for i, q in enumerate(questions):
        side = "train" if i in is_train else "test"
        for name in GRAPHS:
            session = f"eval-{run}-{name}-r{r}-q{i}"
            try:
                ctx = client.context(report.graphs[name]["id"], session, q.q, budget=cfg.budget)
            except ApiError as exc:
                raise EvaluationError(f"context refused on {name} ({exc.status_code}: {exc.errors}).") from exc
            ranked = ranked_keys(ctx["items"])
            scored = score(ranked, q.useful)
            scores[name][side].append(scored)
            report.questions[i]["top"][name].append(ranked[:K])
            report.questions[i]["recall5"][name].append(scored["recall5"])
            report.questions[i]["ways"][name].append(item_ways(ctx["items"]))
            if name == "learning" and side == "train":
                given[i] = (session, ctx["items"])
    return {"round": r, **{name: _split_means(scores[name]) for name in GRAPHS}}, given


def no_feedback(cfg: EvaluationConfig) -> dict:
    """A round's feedback figures before anything is sent (the last round's, which only measures)."""
    return {
        "mode": cfg.feedback,
        "sessions": 0,
        "uses": 0,
        "negatives": 0,
        "responses": 0,
        "responses_applied": 0,
        "outcomes": {"accepted": 0, "rework": 0, "rejected": 0},
        "not_queued": 0,
        "wait_s": 0.0,
        "resent": 0,
    }


def send_feedback(
    client: GraphClient,
    questions: list[Question],
    report: EvaluationReport,
    given: dict[int, tuple[str, list[dict]]],
    cfg: EvaluationConfig,
    agent_rng: random.Random,
    r: int,
    log: Log,
) -> dict:
    """The simulated agent reports on the learning graph's train sessions; waits until the worker applied them."""
    feedback = no_feedback(cfg)
    pending: list[SentReport] = []
    gid = report.graphs["learning"]["id"]
    for i in report.train:
        session, items = given[i]
        turn = agent_turn(
            items, questions[i].useful, agent_rng, cfg.negative_rate, report_p=cfg.report_p, feedback=cfg.feedback
        )
        feedback["sessions"] += 1
        feedback["outcomes"][turn.outcome] += 1
        sends = []
        if turn.uses:
            feedback["uses"] += sum(1 for u in turn.uses if u["signal"] == "explicit")
            feedback["negatives"] += sum(1 for u in turn.uses if u["signal"] == "negative")
            sends.append(SentReport(session, "uses", turn.uses, uuid.uuid4().hex))
        if turn.response:
            feedback["responses"] += 1
            sends.append(SentReport(session, "response", turn.response, uuid.uuid4().hex))
        sends.append(SentReport(session, "outcome", turn.outcome, uuid.uuid4().hex))
        for sent in sends:  # as an agent does: uses, then the outcome, without waiting in between
            answer = send_report(client, gid, sent)
            if answer.get("status") == "queued":
                pending.append(sent)
            else:
                feedback["not_queued"] += 1
                log(f"round {r}: {session}: {sent.what} report not queued: {answer}")
    feedback.update(wait_applied(client, gid, pending, cfg, log))
    return feedback


def evaluate(
    client: GraphClient,
    vault: str | os.PathLike,
    questions: list[Question],
    cfg: EvaluationConfig,
    log: Log = lambda line: None,
) -> EvaluationReport:
    """Run the whole evaluation (module docstring) and return its report. Writes only through the API."""
    check_config(cfg)
    started = datetime.now(UTC)
    run = f"{started:%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}"
    graphs = make_graphs(client, vault, questions, cfg, run, log)
    report = new_report(vault, questions, cfg, run, graphs, started)
    agent_rng = random.Random(cfg.seed + 1_000_003)
    measure_baselines(client, questions, report)
    for r in range(cfg.rounds + 1):
        t0 = time.monotonic()
        row, given = measure_round(client, questions, report, cfg, r)
        if r == 0:  # after round 0's own questions, before any feedback
            measure_ablation(client, questions, report, cfg)
        if r < cfg.rounds:
            row["feedback"] = send_feedback(client, questions, report, given, cfg, agent_rng, r, log)
        else:  # the last round only measures
            row["feedback"] = no_feedback(cfg)
        row["seconds"] = round(time.monotonic() - t0, 2)
        report.rounds.append(row)
        lt, ft = row["learning"]["train"], row["frozen"]["train"]
        log(
            f"round {r}: train recall@5 {lt['recall5']:.3f} (frozen {ft['recall5']:.3f}), test recall@5 "
            f"{row['learning']['test']['recall5']:.3f} (frozen {row['frozen']['test']['recall5']:.3f}); "
            f"{row['feedback']['sessions']} sessions reported, {row['seconds']:.1f}s"
        )
    report.finished_at = datetime.now(UTC).isoformat()
    return report
