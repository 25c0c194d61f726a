"""The second evaluation set (demo/conversation): frozen since the tag h23-evalset-data.

The files must match MANIFEST.sha256 (written once, when the set was committed, before any retrieval
ran on it), the generator must still write exactly those bytes, and the set must be what the issue
asks: at least 400 one-message notes and 100 questions whose useful keys are notes of the vault.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
from pathlib import Path

from feedback.harness import config, evaluation
from graphadmin.vault.parse import parse_vault
from tests.conftest import ROOT as REPOSITORY

ROOT = REPOSITORY / "demo" / "conversation"
MANIFEST = ROOT / "MANIFEST.sha256"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest() -> dict[str, str]:
    out = {}
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        out[name] = digest
    return out


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p != MANIFEST)


def test_files_match_the_manifest():
    manifest = _manifest()
    on_disk = {p.relative_to(ROOT).as_posix(): _digest(p) for p in _files(ROOT)}
    assert sorted(on_disk) == sorted(manifest), "files added to or removed from demo/conversation since the tag"
    changed = sorted(name for name, digest in on_disk.items() if manifest[name] != digest)
    assert not changed, f"edited after the tag h23-evalset-data: {changed[:5]}"


def test_the_generator_writes_the_same_bytes(tmp_path):
    spec = importlib.util.spec_from_file_location("conversation_generate", ROOT / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = module.build(tmp_path)
    manifest = _manifest()
    written = {p.relative_to(tmp_path).as_posix(): _digest(p) for p in _files(tmp_path)}
    assert written == {name: d for name, d in manifest.items() if name.startswith("vault/") or name == "questions.json"}
    assert counts["messages"] >= 400 and counts["questions"] >= 100


def test_the_set_is_what_the_issue_asks():
    questions = config.load_questions(ROOT / "questions.json")
    assert len(questions) >= 100
    # As the evaluation imports it: zipped in memory, parsed by the product's vault reader.
    parsed = parse_vault(io.BytesIO(evaluation.zip_vault(ROOT / "vault")))
    assert not parsed.warnings and not parsed.skipped
    keys = set(parsed.notes)
    assert len(keys) >= 400
    assert {k for q in questions for k in q.useful} <= keys
    speakers = {k.split("/")[1].split(" ", 1)[1] for k in keys}
    assert len(speakers) >= 5  # several people
    assert len({k.split("/")[0] for k in keys}) >= 30  # over many days
