"""What the learning harnesses measured: one report type per run, side by side.

``WorldReport`` (blocks of sessions on the synthetic world, learning against frozen), ``HistoryReport``
(the demo's history: sessions, outcomes, decay runs, hit@5 first and last tenth) and
``EvaluationReport`` (the over-HTTP evaluation's rounds; its ``as_dict`` is evaluate_learning's
``--json`` file and ``evaluate_all`` reads it back). The figures come from ``scoring``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

from .scoring import bootstrap_mean, bootstrap_paired, mean

GRAPHS = ("learning", "frozen")
SPLITS = ("train", "test")
ALL = "all"  # the group of every question, beside one group per category
# Known categories in the order tables list them (LoCoMo's, feedback.harness.locomo.CATEGORIES); others follow
# in the order they first appear.
CATEGORY_ORDER = ("multi-hop", "temporal", "open-domain", "single-hop")


@dataclass
class Block:
    """One block of sessions: mean hit@5 and MRR for the learning and the frozen graph."""

    start: int
    end: int
    phase: int
    hit5: float
    mrr: float
    frozen_hit5: float | None = None
    frozen_mrr: float | None = None


@dataclass
class WorldReport:
    """What ``world.simulate`` measured: hit@5 and MRR per block of sessions, learning against frozen."""

    config: dict
    blocks: list[Block] = field(default_factory=list)
    decay_runs: int = 0
    outcomes: dict = field(default_factory=dict)

    def targets(self) -> dict:
        """The issue's two targets, measured on the blocks (None where the run is too short to say)."""
        cfg = self.config
        shift = cfg["shift_at"] or cfg["sessions"]
        pre = [b for b in self.blocks if b.end <= shift]
        # "After 500 sessions": the last 100 sessions up to session 500 (or the shift, if earlier); one block
        # of 50 sessions is too noisy a sample for the frozen policy (about +-7 points).
        end = min(500, shift)
        window = [b for b in pre if end - 100 < b.end <= end and b.frozen_hit5 is not None]
        gain = (mean(b.hit5 for b in window) - mean(b.frozen_hit5 for b in window)) if window else None
        out = {
            "gain_at_500": gain,
            "gain_window": [window[0].start, window[-1].end] if window else None,
            "learning_hit5_at_500": mean(b.hit5 for b in window) if window else None,
            "frozen_hit5_at_500": mean(b.frozen_hit5 for b in window) if window else None,
        }
        if cfg["shift_at"] and pre:
            level = pre[-1].hit5
            post = [b for b in self.blocks if b.start >= shift]
            back = next((b for b in post if b.hit5 >= level - 0.05), None)
            best = max(post, key=lambda b: b.hit5) if post else None
            out.update(
                {
                    "pre_shift_level": level,
                    "recovered_after": None if back is None else back.end - shift,
                    "best_post_shift": None if best is None else best.hit5,
                    "best_post_shift_after": None if best is None else best.end - shift,
                }
            )
        return out

    def as_dict(self) -> dict:
        return {
            "config": self.config,
            "blocks": [asdict(b) for b in self.blocks],
            "decay_runs": self.decay_runs,
            "outcomes": self.outcomes,
            "targets": self.targets(),
        }

    def table(self) -> str:
        lines = [
            "| sessions | phase | hit@5 learning | hit@5 frozen | MRR learning | MRR frozen |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for b in self.blocks:
            fh = "" if b.frozen_hit5 is None else f"{b.frozen_hit5:.2f}"
            fm = "" if b.frozen_mrr is None else f"{b.frozen_mrr:.2f}"
            lines.append(f"| {b.start + 1}-{b.end} | {b.phase} | {b.hit5:.2f} | {fh} | {b.mrr:.2f} | {fm} |")
        return "\n".join(lines)


@dataclass
class HistoryReport:
    """What :func:`simulate_history` did: sessions, outcomes, decay runs, the days rolled up, the span."""

    sessions: int = 0
    outcomes: dict = field(default_factory=lambda: {"accepted": 0, "rework": 0, "rejected": 0})
    decay_runs: int = 0
    days: int = 0
    start: datetime | None = None
    end: datetime | None = None
    hit5_first: float = 0.0
    hit5_last: float = 0.0


@dataclass
class EvaluationReport:
    """Everything one evaluation measured; ``as_dict`` is the --json file."""

    config: dict
    graphs: dict
    train: list[int]
    test: list[int]
    questions: list[dict]
    rounds: list[dict] = field(default_factory=list)
    plain: dict = field(default_factory=dict)  # plain cosine top 5 per split (node vectors alone)
    hybrid: dict = field(default_factory=dict)  # cosine + BM25 (scoring.hybrid_keys) top 5 per split
    hops0: dict = field(default_factory=dict)  # the frozen twin at round 0 with hops 0 (entry points only)
    started_at: str = ""
    finished_at: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    def final(self) -> dict:
        return self.rounds[-1]

    def baseline(self) -> dict:
        """Round 0's frozen recall@5 per split (what a new user meets) and over all questions; plain cosine too."""
        first = self.rounds[0]["frozen"]
        n = {side: first[side]["n"] for side in SPLITS}
        total = sum(n.values()) or 1
        out = {side: first[side]["recall5"] for side in SPLITS}
        out["all"] = round(sum(first[side]["recall5"] * n[side] for side in SPLITS) / total, 4)
        if self.plain:
            out["plain"] = {side: self.plain[side]["recall5"] for side in SPLITS}
            out["plain"]["all"] = round(sum(self.plain[side]["recall5"] * n[side] for side in SPLITS) / total, 4)
        return out

    def targets(self) -> dict:
        """The targets on the last round, recall@5.

        Against round 0's frozen figure (the baseline): train at least halfway from it to
        1.0; test no more than 2 points below it; the frozen twin no lower than it (no drift); frozen
        retrieval at or above plain cosine. And, kept beside them, the learning graph against the same
        round's twin (docs/learning.md lists both sets of targets).
        """
        last = self.final()
        lt, ft = last["learning"]["train"]["recall5"], last["frozen"]["train"]["recall5"]
        ls, fs = last["learning"]["test"]["recall5"], last["frozen"]["test"]["recall5"]
        base = self.baseline()
        bt, bs = base["train"], base["test"]
        needed = min(0.10, (1.0 - ft) / 2) if ft > 0.8 else 0.10
        out = {
            "base_train": bt,
            "base_test": bs,
            "train_vs_base": round(lt - bt, 4),
            "train_vs_base_needed": round((1.0 - bt) / 2, 4),
            "train_vs_base_met": lt - bt >= (1.0 - bt) / 2 - 1e-9,
            "test_vs_base": round(ls - bs, 4),
            "test_vs_base_allowed": -0.02,
            "test_vs_base_met": ls - bs >= -0.02 - 1e-9,
            "twin_drift_train": round(ft - bt, 4),
            "twin_drift_test": round(fs - bs, 4),
            "twin_met": ft - bt >= -1e-9 and fs - bs >= -1e-9,
            "train_gain": round(lt - ft, 4),
            "train_gain_needed": round(needed, 4),
            "train_met": lt - ft >= needed - 1e-9,
            "test_change": round(ls - fs, 4),
            "test_change_allowed": -0.02,
            "test_met": ls - fs >= -0.02 - 1e-9,
        }
        if "plain" in base:
            out["frozen_vs_plain"] = round(base["all"] - base["plain"]["all"], 4)
            out["frozen_vs_plain_met"] = base["all"] - base["plain"]["all"] >= -1e-9
        return out

    def moved(self) -> dict:
        """Per split, how many questions the learning graph answers better or worse than frozen.

        By recall@5, in the last round.
        """
        out = {side: {"better": 0, "worse": 0, "same": 0} for side in SPLITS}
        for q in self.questions:
            diff = q["recall5"]["learning"][-1] - q["recall5"]["frozen"][-1]
            out[q["split"]]["better" if diff > 1e-9 else "worse" if diff < -1e-9 else "same"] += 1
        return out

    def groups(self) -> dict[str, list[dict]]:
        """The question rows by group: ``all``, then one group per category (``CATEGORY_ORDER`` first)."""
        return question_groups(self.questions)

    def summary(self) -> dict:
        """Every figure per group of questions (``all`` and each category), for the JSON report and the tables.

        Per group: ``n`` (and per split); ``frozen0``: recall@5 of the frozen twin at round 0 (``product``), of the
        two baselines (``plain``, ``hybrid``) and with ``hops: 0`` (``hops0``), each the mean over the group's
        questions with its 95% bootstrap interval, and the paired differences ``product_vs_hybrid`` and
        ``expansion`` (product - hops0); ``edges``: the items received at round 0 by the frozen twin and how many
        came through an edge, by edge type (and the same of the learning graph's last round,
        ``edges_learning_last``); ``rounds``: per round, each graph's recall@5 per split.
        """
        return {name: group_summary(rows) for name, rows in self.groups().items()}

    def table(self) -> str:
        """The per-round table: hit@5, recall@5, MRR@5 for learning and frozen, train and test; recall@5 of
        learning against the same round's twin and against round 0's frozen figure, and the twin's drift
        from it; the plain-cosine baseline below."""
        head = (
            f"{'round':>5} {'split':<5} | {'learning':^20} | {'frozen':^20} | {'recall@5':^26}\n"
            f"{'':>5} {'':<5} | {'hit@5':>6} {'rec@5':>6} {'MRR@5':>6} "
            f"| {'hit@5':>6} {'rec@5':>6} {'MRR@5':>6} | {'l - f':>8} {'l - base':>8} {'drift':>8}"
        )
        lines = [head, "-" * len(head.splitlines()[1])]
        first = self.rounds[0]["frozen"] if self.rounds else {}
        for r in self.rounds:
            for s in SPLITS:
                lm, fm = r["learning"][s], r["frozen"][s]
                b = first[s]["recall5"]
                lines.append(
                    f"{r['round']:>5} {s:<5} | {lm['hit5']:6.3f} {lm['recall5']:6.3f} {lm['mrr5']:6.3f} | "
                    f"{fm['hit5']:6.3f} {fm['recall5']:6.3f} {fm['mrr5']:6.3f} | {lm['recall5'] - fm['recall5']:+8.3f} "
                    f"{lm['recall5'] - b:+8.3f} {fm['recall5'] - b:+8.3f}"
                )
        if self.rounds:
            lines.append(
                f"base = round 0, frozen: train {first['train']['recall5']:.3f}, test {first['test']['recall5']:.3f}; "
                "drift = the frozen twin against it"
            )
        if self.plain:
            lines.append(
                f"plain cosine top 5 (node vectors alone: search hits by vector_score): recall@5 train "
                f"{self.plain['train']['recall5']:.3f}, test {self.plain['test']['recall5']:.3f}"
            )
        if self.hybrid:
            lines.append(
                f"cosine + BM25 top 5 (RRF k=60 of the two raw rankings): recall@5 train "
                f"{self.hybrid['train']['recall5']:.3f}, test {self.hybrid['test']['recall5']:.3f}"
            )
        if self.hops0:
            lines.append(
                f"frozen, round 0, hops 0 (entry points only): recall@5 train {self.hops0['train']['recall5']:.3f}, "
                f"test {self.hops0['test']['recall5']:.3f}"
            )
        return "\n".join(lines)

    def markdown_row(self, label: str, rows: list[dict] | None = None) -> str:
        """One markdown table row of the run (see ``MARKDOWN_HEAD``): round 0 against the last round, over the
        question rows ``rows`` (all of them by default: a category's rows give its row)."""
        return "| " + " | ".join([label, *run_cells(self.questions if rows is None else rows)]) + " |"


def fmt_pair(train: float | None, test: float | None, points: bool = False) -> str:
    def one(x):
        if x is None:
            return "–"
        return f"{x * 100:+.1f}" if points else f"{x:.3f}"

    return f"{one(train)} / {one(test)}"


def _split_mean(rows: list[dict], side: str, value) -> float | None:
    """The mean of ``value(row)`` over the rows of a split (None when no row of it has the value)."""
    got = [v for v in (value(q) for q in rows if q["split"] == side) if v is not None]
    return mean(got) if got else None


def _at(q: dict, graph: str, r: int) -> float | None:
    values = q.get("recall5", {}).get(graph, [])
    return values[r] if values and -len(values) <= r < len(values) else None


def run_figures(rows: list[dict]) -> dict:
    """Recall@5 per split over question rows: the baselines, round 0 frozen (base), the last round of both
    graphs, learning - base and the twin's drift (None where the rows do not have the figure)."""
    out: dict = {}
    for side in SPLITS:
        f = {
            "plain": _split_mean(rows, side, lambda q: q.get("plain_recall5")),
            "hybrid": _split_mean(rows, side, lambda q: q.get("hybrid_recall5")),
            "base": _split_mean(rows, side, lambda q: _at(q, "frozen", 0)),
            "learning": _split_mean(rows, side, lambda q: _at(q, "learning", -1)),
            "frozen": _split_mean(rows, side, lambda q: _at(q, "frozen", -1)),
        }
        f["learning_vs_base"] = None if f["learning"] is None or f["base"] is None else f["learning"] - f["base"]
        f["drift"] = None if f["frozen"] is None or f["base"] is None else f["frozen"] - f["base"]
        f["n"] = sum(1 for q in rows if q["split"] == side)
        out[side] = f
    return out


def run_cells(rows: list[dict]) -> list[str]:
    """The cells of ``MARKDOWN_HEAD`` (after the label) over question rows."""
    f = run_figures(rows)
    tr, te = f["train"], f["test"]
    return [
        f"{tr['n']} / {te['n']}",
        *(fmt_pair(tr[k], te[k]) for k in ("plain", "hybrid", "base", "learning", "frozen")),
        fmt_pair(tr["learning_vs_base"], te["learning_vs_base"], points=True),
        fmt_pair(tr["drift"], te["drift"], points=True),
    ]


def question_groups(questions: list[dict]) -> dict[str, list[dict]]:
    """``all`` the question rows, then the rows of each category (``CATEGORY_ORDER`` first, then by first
    appearance); rows without a category belong to ``all`` only."""
    seen = list(dict.fromkeys(q.get("category") or "" for q in questions))
    order = [c for c in CATEGORY_ORDER if c in seen] + [c for c in seen if c and c not in CATEGORY_ORDER]
    out = {ALL: list(questions)}
    for c in order:
        out[c] = [q for q in questions if q.get("category") == c]
    return out


def edge_counts(ways_lists: list[list[str | None]]) -> dict:
    """Items received and those that came through an edge, by edge type, over a list of answers' ``ways``."""
    items = sum(len(w) for w in ways_lists)
    by_type: dict[str, int] = {}
    for ways in ways_lists:
        for way in ways:
            if way is not None:
                by_type[way] = by_type.get(way, 0) + 1
    through = sum(by_type.values())
    return {
        "items": items,
        "through_edge": through,
        "share": round(through / items, 4) if items else 0.0,
        "by_type": dict(sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def group_summary(rows: list[dict]) -> dict:
    """``EvaluationReport.summary``'s figures for one group of question rows."""
    out: dict = {"n": len(rows), "n_split": {side: sum(1 for q in rows if q["split"] == side) for side in SPLITS}}
    product = [_at(q, "frozen", 0) for q in rows]
    if rows and all(v is not None for v in product):
        frozen0 = {"product": bootstrap_mean(product)}
        pairs = {"plain": "plain_recall5", "hybrid": "hybrid_recall5", "hops0": "hops0_recall5"}
        for name, key in pairs.items():
            if all(key in q for q in rows):
                frozen0[name] = bootstrap_mean([q[key] for q in rows])
        if "hybrid" in frozen0:
            frozen0["product_vs_hybrid"] = bootstrap_paired(product, [q["hybrid_recall5"] for q in rows])
        if "hops0" in frozen0:
            frozen0["expansion"] = bootstrap_paired(product, [q["hops0_recall5"] for q in rows])
        out["frozen0"] = frozen0
    if rows and all(q.get("ways", {}).get("frozen") for q in rows):
        out["edges"] = edge_counts([q["ways"]["frozen"][0] for q in rows])
        out["edges_learning_last"] = edge_counts([q["ways"]["learning"][-1] for q in rows])
    if rows and all("hops0_ways" in q for q in rows):
        out["edges_hops0"] = edge_counts([q["hops0_ways"] for q in rows])
    n_rounds = min((len(q.get("recall5", {}).get("frozen", [])) for q in rows), default=0)
    out["rounds"] = [
        {
            "round": r,
            **{g: {side: _split_mean(rows, side, lambda q, g=g, r=r: _at(q, g, r)) for side in SPLITS} for g in GRAPHS},
        }
        for r in range(n_rounds)
    ]
    return out


MARKDOWN_HEAD = (
    "| run | questions: train / test | plain cosine: train / test | cosine + BM25: train / test "
    "| round 0, frozen (base): train / test "
    "| last round, learning: train / test | last round, frozen twin: train / test "
    "| learning - base, points: train / test | twin drift, points: train / test |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _ci(b: dict | None, points: bool = False) -> str:
    """A bootstrap figure as ``0.596 [0.55, 0.64]`` (recall) or ``+1.2 [-0.8, +3.1]`` (points)."""
    if not b:
        return "–"
    if points:
        return f"{b['mean'] * 100:+.1f} [{b['lo'] * 100:+.1f}, {b['hi'] * 100:+.1f}]"
    return f"{b['mean']:.3f} [{b['lo']:.2f}, {b['hi']:.2f}]"


def _edges_cell(e: dict | None) -> tuple[str, str]:
    if not e:
        return "–", "–"
    types = ", ".join(f"{t} {c}" for t, c in e["by_type"].items()) or "none"
    return f"{e['share'] * 100:.1f}% ({e['through_edge']} of {e['items']})", types


FROZEN0_HEAD = (
    "| questions | n | plain cosine | cosine + BM25 | product (default hops) | product - cosine + BM25, points "
    "| hops 0 | expansion: default - hops 0, points | items through an edge | by edge type |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


def frozen0_table(summary: dict) -> str:
    """The frozen twin at round 0, per group of questions: both baselines, the product, the ablation (hops 0) and
    the items that came through an edge, with 95% bootstrap intervals over questions (``summary``: a
    ``EvaluationReport.summary()``)."""
    lines = [FROZEN0_HEAD]
    for name, g in summary.items():
        f = g.get("frozen0", {})
        share, types = _edges_cell(g.get("edges"))
        cells = [
            name,
            str(g["n"]),
            _ci(f.get("plain")),
            _ci(f.get("hybrid")),
            _ci(f.get("product")),
            _ci(f.get("product_vs_hybrid"), points=True),
            _ci(f.get("hops0")),
            _ci(f.get("expansion"), points=True),
            share,
            types,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ablation_means(summaries: dict[str, dict]) -> str:
    """The ablation over several sets (``summaries``: set name -> ``EvaluationReport.summary()``): per group of
    questions, the mean over the sets of each figure (each set weighs the same), the sets where expansion lost
    (default below hops 0) and the share of items through an edge over all sets' items."""
    groups = list(dict.fromkeys(g for s in summaries.values() for g in s))
    head = (
        "| questions | sets | n | plain cosine | cosine + BM25 | product | hops 0 | expansion, points "
        "| sets where expansion lost | product - cosine + BM25, points | items through an edge |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for group in groups:
        rows = [s[group] for s in summaries.values() if group in s and "frozen0" in s[group]]
        if not rows:
            continue

        def m(name, rows=rows):
            got = [r["frozen0"][name]["mean"] for r in rows if name in r["frozen0"]]
            return mean(got) if got else None

        lost = sum(1 for r in rows if "expansion" in r["frozen0"] and r["frozen0"]["expansion"]["mean"] < 0)
        items = sum(r.get("edges", {}).get("items", 0) for r in rows)
        through = sum(r.get("edges", {}).get("through_edge", 0) for r in rows)
        exp, gap = m("expansion"), m("product_vs_hybrid")
        cells = [
            group,
            str(len(rows)),
            str(sum(r["n"] for r in rows)),
            *(("–" if m(k) is None else f"{m(k):.3f}") for k in ("plain", "hybrid", "product", "hops0")),
            "–" if exp is None else f"{exp * 100:+.1f}",
            str(lost),
            "–" if gap is None else f"{gap * 100:+.1f}",
            f"{through / items * 100:.1f}%" if items else "–",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
