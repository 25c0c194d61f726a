"""The LoCoMo converter on a tiny hand-made conversation of the same shape (the real data never enters the suite)."""

import json
import zipfile

import pytest

from feedback.harness.config import EvaluationError, load_questions
from feedback.harness.locomo import convert, convert_sample, turn_key
from graphadmin.vault.parse import parse_vault

SAMPLE = {
    "sample_id": "conv-26",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Pixel."},
            {
                "speaker": "Ben",
                "dia_id": "D1:2",
                "text": "Look at my garden!",
                "img_url": ["http://example.invalid/x.jpg"],
                "blip_caption": "a photo of tomatoes",
            },
        ],
        "session_2_date_time": "9:00 am on 1 June, 2023",
        "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Pixel knocked over the tomatoes."}],
        "session_3_date_time": "10:00 am on 2 June, 2023",  # a date without turns: no session
    },
    "qa": [
        {"question": "What is Ana's cat called?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
        {"question": "What did the cat break?", "answer": "x", "evidence": ["D1:1", "D2:1; D1:2"], "category": 1},
        {"question": "Adversarial", "adversarial_answer": "x", "evidence": ["D1:2"], "category": 5},
        {"question": "Broken evidence", "answer": "x", "evidence": ["D9:9"], "category": 2},
    ],
}


def test_turn_notes_session_notes_and_questions(tmp_path):
    converted = convert_sample(SAMPLE, tmp_path, "26")
    assert (converted.turns, converted.sessions, converted.questions_kept) == (3, 2, 2)
    assert converted.evidence_missing == 1
    second = (converted.vault / "Session 01" / "D1-2.md").read_text()
    assert second == (
        '---\nspeaker: "Ben"\ndate: "1:56 pm on 8 May, 2023"\n---\n\n'
        "Ben (1:56 pm on 8 May, 2023): Look at my garden!\n\n"
        "(shared a photo: a photo of tomatoes)\n\nfollows:: [[D1-1]]\n"
    )
    assert "follows::" not in (converted.vault / "Session 02" / "D2-1.md").read_text()  # first turn of its session
    index = (converted.vault / "Session 01" / "Session 01.md").read_text()
    assert "- [[D1-1]]\n- [[D1-2]]" in index and "Ana and Ben" in index
    questions = load_questions(converted.questions)
    assert [(q.q, q.useful, q.category) for q in questions] == [
        ("What is Ana's cat called?", ["Session 01/D1-1"], "single-hop"),
        ("What did the cat break?", ["Session 01/D1-1", "Session 02/D2-1", "Session 01/D1-2"], "multi-hop"),
    ]


def test_the_vault_parses_with_its_links(tmp_path):
    converted = convert_sample(SAMPLE, tmp_path, "26")
    parsed = parse_vault(converted.vault)
    try:
        assert set(parsed.notes) == {
            "Session 01/D1-1",
            "Session 01/D1-2",
            "Session 02/D2-1",
            "Session 01/Session 01",
            "Session 02/Session 02",
        }
        assert {(link.source, link.target, link.edge_type) for link in parsed.links} == {
            ("Session 01/D1-2", "Session 01/D1-1", "follows"),
            ("Session 01/Session 01", "Session 01/D1-1", "related"),
            ("Session 01/Session 01", "Session 01/D1-2", "related"),
            ("Session 02/Session 02", "Session 02/D2-1", "related"),
        }
        assert not parsed.unresolved
    finally:
        parsed.close()


def test_turn_key():
    assert turn_key("D3:12") == "Session 03/D3-12"
    assert turn_key("D3") is None


def test_reserved_conversations_are_refused(tmp_path):
    archive = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data/x/42.json", json.dumps(SAMPLE))
        z.writestr("data/x/26.json", json.dumps(SAMPLE))
    with pytest.raises(EvaluationError, match="reserved"):
        convert("42", archive, tmp_path / "out")
    assert convert("26", archive, tmp_path / "out").questions_kept == 2
    with pytest.raises(EvaluationError, match="no LoCoMo archive"):
        convert("30", tmp_path / "missing.zip", tmp_path / "out")
