"""The simulated agent of the learning harnesses: what it reports after a context answer.

It behaves like a real one: it reports as ``explicit`` uses only the notes it was given (the selected
items, up to the budget) that answer the question; with probability ``negative_rate`` it flags ONE
given note that does not answer it as ``negative`` (a note it did not use is otherwise left alone: not
used means no change); and it reports the outcome from what it found: ``accepted`` when it was given
every useful note, ``rework`` when some, ``rejected`` when none. The demo's history
(``history.simulate_history``) and the over-HTTP evaluation (``evaluation.evaluate``) both use it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from .config import FEEDBACK_MODES, EvaluationError


def sentences(text: str) -> list[str]:
    """The sentences of a note's text (markdown headings and blank lines dropped), in order."""
    body = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    parts = re.split(r"(?<=[.!?])\s+", body)
    return [p.strip() for p in parts if p.strip()]


@dataclass
class AgentTurn:
    """What the simulated agent sends for one session: use items, an answer text, the outcome (always)."""

    uses: list[dict]
    response: str
    outcome: str


def agent_turn(
    items: list[dict],
    useful: list[str],
    rng: random.Random,
    negative_rate: float,
    *,
    report_p: float = 1.0,
    feedback: str = "explicit",
) -> AgentTurn:
    """What the simulated agent sends for one session, by feedback mode.

    ``explicit``: every given note that answers the question as an ``explicit`` use, each with
    probability ``report_p``; with probability ``negative_rate`` one given note that does not answer
    it as ``negative``. ``response``: no use items; the answer text, one sentence (a seeded pick among
    its sentences) of each given note that answers the question, in the order given. ``outcome``:
    neither. In every mode the outcome comes from what it was given: accepted (every useful note),
    rework (some), rejected (none). Draws: two per session (the negative flag), then one per useful
    note given when ``report_p`` < 1 (explicit) or per sentence picked (response), so with the
    defaults a run draws exactly what it drew before these modes existed.
    """
    if feedback not in FEEDBACK_MODES:
        raise EvaluationError(f"--feedback must be one of {', '.join(FEEDBACK_MODES)}, not {feedback!r}.")
    wanted = set(useful)
    given: dict[str, dict] = {}
    for item in sorted(items, key=lambda i: i["rank"]):
        given.setdefault(item["key"], item)
    found = [item for key, item in given.items() if key in wanted]
    wrong = [item["node"] for key, item in given.items() if key not in wanted]
    draw, pick = rng.random(), rng.random()
    outcome = "accepted" if len(found) == len(wanted) else ("rework" if found else "rejected")
    uses: list[dict] = []
    response = ""
    if feedback == "explicit":
        for item in found:
            if report_p >= 1.0 or rng.random() < report_p:
                uses.append({"node": item["node"], "signal": "explicit"})
        if wrong and draw < negative_rate:
            uses.append({"node": wrong[int(pick * len(wrong))], "signal": "negative"})
    elif feedback == "response":
        picked = []
        for item in found:
            options = sentences(item.get("text") or "") or [item.get("title") or item["key"]]
            picked.append(options[int(rng.random() * len(options))])
        response = " ".join(picked)
    return AgentTurn(uses, response, outcome)


def agent_reports(
    items: list[dict], useful: list[str], rng: random.Random, negative_rate: float
) -> tuple[list[dict], str]:
    """The explicit agent with every use reported: (use items, outcome). See ``agent_turn``."""
    turn = agent_turn(items, useful, rng, negative_rate)
    return turn.uses, turn.outcome
