"""The abstention evaluation sets (demo/unanswerable): frozen since they were written, before any retrieval ran.

The files must match MANIFEST.sha256 and be what the evaluation reads: off-topic and near-domain questions for
the Harbor vault and the conversation set, none of them one of the set's answerable questions.
"""

from __future__ import annotations

import hashlib

from feedback.harness import abstention, config
from tests.conftest import ROOT as REPOSITORY

ROOT = REPOSITORY / "demo" / "unanswerable"


def test_files_match_the_manifest():
    manifest = {}
    for line in (ROOT / "MANIFEST.sha256").read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        manifest[name] = digest
    on_disk = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in ROOT.glob("*.json")}
    assert on_disk == manifest, "demo/unanswerable edited or extended after it was frozen"


def test_each_set_has_enough_questions_of_each_kind_and_none_answerable():
    for name, (vault, answerable, unanswerable) in abstention.SETS.items():
        questions = abstention.load_unanswerable(REPOSITORY / unanswerable)
        kinds = [kind for _q, kind in questions]
        assert kinds.count("off_topic") >= 30 and kinds.count("near_domain") >= 20, name
        asked = {q.q for q in config.load_questions(REPOSITORY / answerable)}
        assert not asked & {q for q, _kind in questions}, name
        assert (REPOSITORY / vault).is_dir()
