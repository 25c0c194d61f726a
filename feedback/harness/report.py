"""What the learning harnesses measured: one report type per run, side by side.

``WorldReport`` (blocks of sessions on the synthetic world, learning against frozen), ``HistoryReport``
(the demo's history: sessions, outcomes, decay runs, hit@5 first and last tenth) and
``EvaluationReport`` (the over-HTTP evaluation's rounds; its ``as_dict`` is evaluate_learning's
``--json`` file and ``evaluate_all`` reads it back). The figures come from ``scoring``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

from .scoring import mean

GRAPHS = ("learning", "frozen")
SPLITS = ("train", "test")


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
        return "\n".join(lines)

    def markdown_row(self, label: str) -> str:
        """One markdown table row of the run (see ``MARKDOWN_HEAD``): round 0 against the last round."""
        base, t, last = self.baseline(), self.targets(), self.final()
        plain = base.get("plain", {"train": float("nan"), "test": float("nan")})
        cells = [
            label,
            f"{plain['train']:.3f} / {plain['test']:.3f}",
            f"{base['train']:.3f} / {base['test']:.3f}",
            f"{last['learning']['train']['recall5']:.3f} / {last['learning']['test']['recall5']:.3f}",
            f"{last['frozen']['train']['recall5']:.3f} / {last['frozen']['test']['recall5']:.3f}",
            f"{t['train_vs_base'] * 100:+.1f} / {t['test_vs_base'] * 100:+.1f}",
            f"{t['twin_drift_train'] * 100:+.1f} / {t['twin_drift_test'] * 100:+.1f}",
        ]
        return "| " + " | ".join(cells) + " |"


MARKDOWN_HEAD = (
    "| run | plain cosine: train / test | round 0, frozen (base): train / test "
    "| last round, learning: train / test | last round, frozen twin: train / test "
    "| learning - base, points: train / test | twin drift, points: train / test |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)
