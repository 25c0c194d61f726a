"""LoCoMo conversations as evaluation sets: a vault and a questions file, written at run time under ``.local/``.

LoCoMo (the public repository snap-research/locomo, ``data/locomo10.zip``) holds ten long conversations between
two people with questions whose answers are in named turns. Its licence (CC BY-NC 4.0) forbids committing anything
derived from it, so nothing here ships data: ``convert`` reads the archive a developer fetched and writes

* the vault: one note per dialogue turn at ``Session NN/D<s>-<t>.md`` (front matter ``speaker`` and ``date``; body
  ``Speaker (date): text``, then ``(shared a photo: <blip_caption>)`` when the turn has one, then
  ``follows:: [[<previous turn>]]``), and one index note per session, ``Session NN/Session NN.md``, with its date
  and speakers and a list linking its turns;
* the questions: categories 1-4 (5 is adversarial, without an answer in the conversation), each question's
  ``evidence`` turns as its useful notes, its category kept (``CATEGORIES`` names them).

Only the development conversations may be used (``DEV_CONVERSATIONS``); the others are reserved for acceptance and
``convert`` refuses them. Pure Python, no Django: ``manage.py evaluate_all --sets locomo:26`` calls it.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .config import EvaluationError

# The conversations development may use; the other two of the ten are reserved for acceptance: run nothing on them.
DEV_CONVERSATIONS = ("26", "30", "41", "43", "44", "47", "49", "50")
# LoCoMo's question categories (5, adversarial, is left out: its answer is not in the conversation).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_ARCHIVE = ".local/locomo/locomo10.zip"
DEFAULT_OUT = ".local/locomo"

_SESSION = re.compile(r"^session_(\d+)$")
_DIA = re.compile(r"^D(\d+):(\d+)$")


@dataclass(frozen=True)
class ConvertedSet:
    """Where a converted conversation was written, and what it holds."""

    vault: Path
    questions: Path
    turns: int
    sessions: int
    questions_kept: int
    evidence_missing: int  # evidence ids that name no turn (LoCoMo has a few malformed ones): dropped


def turn_key(dia_id: str) -> str | None:
    """``D3:12`` -> ``Session 03/D3-12`` (the note's key: its vault path without .md); None when malformed."""
    m = _DIA.match(dia_id.strip())
    if not m:
        return None
    session, turn = int(m.group(1)), int(m.group(2))
    return f"{session_folder(session)}/D{session}-{turn}"


def session_folder(session: int) -> str:
    return f"Session {session:02d}"


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def turn_note(turn: dict, date: str, previous: str | None) -> str:
    """The markdown of one dialogue turn."""
    speaker = str(turn.get("speaker", "")).strip()
    lines = ["---", f"speaker: {_quote(speaker)}", f"date: {_quote(date)}", "---", ""]
    lines.append(f"{speaker} ({date}): {str(turn.get('text', '')).strip()}")
    caption = turn.get("blip_caption")
    if caption:
        lines.append("")
        lines.append(f"(shared a photo: {str(caption).strip()})")
    if previous:
        lines.append("")
        lines.append(f"follows:: [[{previous}]]")
    return "\n".join(lines) + "\n"


def session_note(session: int, date: str, speakers: list[str], turn_names: list[str]) -> str:
    """The markdown of a session's index note: its date, its speakers and a list linking its turns."""
    lines = [
        "---",
        f"date: {_quote(date)}",
        f"speakers: [{', '.join(_quote(s) for s in speakers)}]",
        "---",
        "",
        f"# {session_folder(session)}",
        "",
        f"A conversation between {' and '.join(speakers)} on {date}.",
        "",
    ]
    lines += [f"- [[{name}]]" for name in turn_names]
    return "\n".join(lines) + "\n"


def sessions_of(sample: dict) -> list[tuple[int, str, list[dict]]]:
    """(number, date, turns) of each session of a LoCoMo sample, in order; sessions without turns left out.

    Reads both shapes of the data: the turns under ``conversation`` (locomo10.json) or at the top level.
    """
    conv = sample.get("conversation", sample)
    out = []
    for key, turns in conv.items():
        m = _SESSION.match(key)
        if m and isinstance(turns, list) and turns:
            n = int(m.group(1))
            out.append((n, str(conv.get(f"{key}_date_time", "")).strip(), turns))
    return sorted(out)


def questions_of(sample: dict, keys: set[str]) -> tuple[list[dict], int]:
    """The questions of categories 1-4 with their evidence turns as useful notes; and how many evidence ids
    named no turn. A question left with no useful note is dropped."""
    out, missing = [], 0
    for item in sample.get("qa", []):
        category = item.get("category")
        if category not in CATEGORIES:
            continue
        useful = []
        for raw in item.get("evidence") or []:
            for part in re.split(r"[;,]", str(raw)):
                key = turn_key(part) if part.strip() else None
                if key in keys:
                    useful.append(key)
                elif part.strip():
                    missing += 1
        useful = list(dict.fromkeys(useful))
        question = str(item.get("question", "")).strip()
        if question and useful:
            out.append({"q": question, "useful": useful, "category": CATEGORIES[category]})
    return out, missing


def load_sample(archive: str | Path, conversation: str) -> dict:
    """One conversation of the LoCoMo archive (``data/locomo10.zip``: one JSON per conversation, or
    locomo10.json holding all ten)."""
    try:
        with zipfile.ZipFile(archive) as z:
            names = z.namelist()
            own = [n for n in names if Path(n).name == f"{conversation}.json"]
            if own:
                return json.loads(z.read(own[0]))
            whole = [n for n in names if Path(n).name == "locomo10.json"]
            for sample in json.loads(z.read(whole[0])) if whole else []:
                if str(sample.get("sample_id", "")).split("-")[-1] == conversation:
                    return sample
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise EvaluationError(f"{archive}: cannot read the LoCoMo archive ({exc}).") from exc
    raise EvaluationError(f"{archive}: no conversation {conversation}.")


def convert_sample(sample: dict, out: str | Path, name: str) -> ConvertedSet:
    """Write one LoCoMo sample as a vault and a questions file under ``out/name/``."""
    root = Path(out) / name
    vault = root / "vault"
    speakers = [s for s in (sample.get("conversation", sample).get(k) for k in ("speaker_a", "speaker_b")) if s]
    keys: set[str] = set()
    sessions = sessions_of(sample)
    turns = 0
    for number, date, session_turns in sessions:
        folder = vault / session_folder(number)
        folder.mkdir(parents=True, exist_ok=True)
        previous, names = None, []
        for turn in session_turns:
            key = turn_key(str(turn.get("dia_id", "")))
            if key is None:
                continue
            note = key.split("/", 1)[1]
            (folder / f"{note}.md").write_text(turn_note(turn, date, previous), encoding="utf-8")
            keys.add(key)
            names.append(note)
            previous = note
            turns += 1
        index = session_folder(number)
        (folder / f"{index}.md").write_text(session_note(number, date, speakers, names), encoding="utf-8")
    questions, missing = questions_of(sample, keys)
    if not questions:
        raise EvaluationError(f"{name}: no question of categories 1-4 names a turn of the conversation.")
    qpath = root / "questions.json"
    qpath.write_text(
        json.dumps(
            {
                "vault": str(vault),
                "about": f"LoCoMo conversation {name}, converted at run time (CC BY-NC 4.0: never committed).",
                "questions": questions,
            },
            ensure_ascii=False,
            indent=1,
        ),
        encoding="utf-8",
    )
    return ConvertedSet(vault, qpath, turns, len(sessions), len(questions), missing)


def convert(conversation: str, archive: str | Path = DEFAULT_ARCHIVE, out: str | Path = DEFAULT_OUT) -> ConvertedSet:
    """Convert development conversation ``conversation`` (e.g. "26") of the archive under ``out/<id>/``.

    Refuses the conversations reserved for acceptance (any id not in DEV_CONVERSATIONS). A set already written is
    written again (the converter is deterministic), so a changed converter never leaves a stale set.
    """
    if conversation not in DEV_CONVERSATIONS:
        raise EvaluationError(
            f"locomo:{conversation}: not a development conversation (use {', '.join(DEV_CONVERSATIONS)}; "
            "the others are reserved for acceptance)."
        )
    if not Path(archive).is_file():
        raise EvaluationError(
            f"{archive}: no LoCoMo archive. Fetch the public repository snap-research/locomo and copy its "
            f"data/locomo10.zip there (docs/learning.md, 'LoCoMo')."
        )
    return convert_sample(load_sample(archive, conversation), out, conversation)
