"""What the learning harnesses are given: their configurations, the questions file and ``--set`` policy pairs.

Three runs, one module: ``WorldConfig`` (the synthetic world, ``world.simulate``), ``HistoryConfig`` (the
demo's history, ``history.simulate_history``) and ``EvaluationConfig`` (the over-HTTP evaluation,
``evaluation.evaluate``). The simulated agent's knobs keep one meaning across them: ``budget`` (context
items), ``p_ignore`` (a use left unreported), ``negative_rate``/``p_negative`` (one useless note flagged),
``seed``. Nothing here touches the database.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

FEEDBACK_MODES = ("explicit", "response", "outcome")


class EvaluationError(Exception):
    """The evaluation cannot run or went wrong: a bad questions file, a refused request, a worker that never applied."""


@dataclass
class Question:
    q: str
    useful: list[str]
    category: str = ""  # the set's own grouping of its questions (LoCoMo's: multi-hop, temporal, ...), if any


@dataclass
class WorldConfig:
    """The synthetic world's run (``world.simulate``); the policy's own numbers are the graph's policy."""

    # The run: how many sessions, when the ground truth shifts (None: never), sessions per reported block.
    sessions: int = 1000
    shift_at: int | None = 500
    block: int = 50
    # The hidden ground truth: useful notes per topic and phase; a question needs ``need + 1`` of them,
    # and the agent accepts with ``need`` found.
    useful_per_topic: int = 4
    need: int = 2
    # The agent: its context budget (items) and its noise.
    budget: int = 6
    p_ignore: float = 0.15
    p_negative: float = 0.2
    p_outcome_noise: float = 0.05
    question_noise: float = 0.5
    # The simulated clock: sessions per day; decay runs at every period boundary when ``decay``.
    sessions_per_day: int = 20
    decay: bool = True
    seed: int = 11


@dataclass
class HistoryConfig:
    """A history of agent sessions asking real questions, spread over simulated weeks (the demo's)."""

    sessions: int = 160
    weeks: int = 9
    budget: int = 5
    negative_rate: float = 0.2
    p_ignore: float = 0.1
    decay: bool = True
    seed: int = 5


@dataclass
class EvaluationConfig:
    """One evaluation: rounds of feedback, the split, the agent's budget and noise, policy changes for both graphs."""

    organization: str
    rounds: int = 5
    train_fraction: float = 0.5
    seed: int = 0
    budget: int | None = None  # context budget in items; None: the graph policy's default
    negative_rate: float = 0.3
    report_p: float = 1.0  # explicit feedback: each used note is reported with this probability
    feedback: str = "explicit"  # explicit (uses + outcome), response (answer text + outcome), outcome (alone)
    policy: dict = field(default_factory=dict)
    wait_timeout: float = 300.0
    poll_interval: float = 0.5
    resend_after: float = 15.0  # seconds without any report applied before the rest are sent again (same key)
    max_resends: int = 3


def load_questions(path: str | os.PathLike) -> list[Question]:
    """Read ``{"questions": [{"q": "...", "useful": ["note key", ...], "category": "..."}, ...]}`` (category optional).

    Anything else is refused with the reason.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"{path}: cannot read the questions ({exc}).") from exc
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise EvaluationError(f'{path}: expected {{"questions": [{{"q": "...", "useful": ["note key", ...]}}, ...]}}.')
    out = []
    for i, item in enumerate(items):
        q = item.get("q") if isinstance(item, dict) else None
        useful = item.get("useful") if isinstance(item, dict) else None
        if not isinstance(q, str) or not q.strip():
            raise EvaluationError(f"{path}: question {i}: 'q' must be a non-empty string.")
        if not isinstance(useful, list) or not useful or not all(isinstance(k, str) and k for k in useful):
            raise EvaluationError(f"{path}: question {i}: 'useful' must be a non-empty list of note keys.")
        category = item.get("category", "")
        if not isinstance(category, str):
            raise EvaluationError(f"{path}: question {i}: 'category' must be a string.")
        out.append(Question(q.strip(), list(dict.fromkeys(useful)), category))
    return out


def parse_settings(pairs: list[str]) -> dict:
    """``["exploration=0", "ceiling_mode=soft"]`` -> ``{"exploration": 0, "ceiling_mode": "soft"}``.

    Numbers as numbers.
    """
    out = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise EvaluationError(f"--set {pair!r}: expected policy_name=value.")
        raw = raw.strip()
        value: object = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                continue
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        out[name.strip()] = value
    return out
