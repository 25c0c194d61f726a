"""The documentation stays honest where that is cheap to check (docs/conventions.md).

- The README stays short: under 220 lines; the manuals live in docs/.
- docs/README.md indexes every page of docs/.
- Every relative link of the README and of docs/*.md leads to a file that exists and, with an
  ``#anchor``, to a heading of that page.
- Every environment variable the product reads is in docs/configuration.md.
- Every management command and every make target is in docs/running.md.

Read from the files (``ast`` for the code), nothing is imported and no database is used.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

DOCS = ROOT / "docs"
APPS = ("graphadmin", "feedback", "ranking")
README_MAX_LINES = 220

# [text](target) or ![alt](target), not inside inline code; the target ends at a space or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _without_code(text: str) -> str:
    """The markdown without fenced blocks and inline code, where a bracket is not a link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def links(text: str) -> list[str]:
    """Every link target of a markdown text, in order."""
    return LINK.findall(_without_code(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of every heading of a page (a repeated heading gets -1, -2, ... as on GitHub)."""
    found: dict[str, int] = {}
    out = set()
    for line in re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL).splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        n = found.get(base, 0)
        found[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """'page: target (why)' for every relative link of ``page`` (under ``root``) that leads nowhere."""
    out = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        name = f"{page.relative_to(root)}: {target}"
        if not dest.exists():
            out.append(f"{name} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{name} (no heading #{anchor} in {dest.name})")
    return out


def environment_reads(source: str) -> set[str]:
    """The environment variables a module reads: ``env.<kind>("NAME")`` / ``env("NAME")`` (django-environ),
    ``os.environ.get("NAME")``, ``os.environ["NAME"]`` and ``os.getenv("NAME")``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func, first = node.func, node.args[0].value
            if not isinstance(first, str):
                continue
            if isinstance(func, ast.Name) and func.id == "env":
                names.add(first)
            elif isinstance(func, ast.Attribute):
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id == "env":
                    names.add(first)
                elif isinstance(owner, ast.Attribute) and owner.attr == "environ" and func.attr == "get":
                    names.add(first)
                elif isinstance(owner, ast.Name) and owner.id == "os" and func.attr == "getenv":
                    names.add(first)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "environ"
            and isinstance(node.slice, ast.Constant)
        ):
            names.add(node.slice.value)
    return names


def product_modules() -> list[Path]:
    """Every module of the three apps but their migrations."""
    return [p for app in APPS for p in sorted((ROOT / app).rglob("*.py")) if "migrations" not in p.parts]


def test_readme_fits_on_a_few_screens():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/ and link it"


def test_the_index_lists_every_page():
    index = DOCS / "README.md"
    listed = {(index.parent / t.partition("#")[0]).resolve() for t in links(index.read_text())}
    pages = {p.resolve() for p in DOCS.glob("*.md") if p.name != "README.md"}
    missing = sorted(p.name for p in pages - listed)
    assert pages and missing == [], f"docs/README.md does not link {missing}"


def test_every_link_leads_somewhere():
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    broken = [b for page in pages for b in broken_links(page)]
    assert broken == [], "\n".join(broken)


def test_every_environment_variable_is_documented():
    documented = (DOCS / "configuration.md").read_text()
    read = {name: path for path in product_modules() for name in environment_reads(path.read_text())}
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "RUN_ADDR"} <= set(read)
    missing = sorted(f"{name} ({read[name].relative_to(ROOT)})" for name in read if f"`{name}`" not in documented)
    assert missing == [], "not in docs/configuration.md: " + ", ".join(missing)


def test_every_command_is_documented():
    documented = (DOCS / "running.md").read_text()
    commands = sorted(
        p.stem for app in APPS for p in (ROOT / app).glob("**/management/commands/*.py") if p.stem != "__init__"
    )
    assert "rundemo" in commands
    missing = [c for c in commands if not re.search(rf"`manage\.py {c}\b", documented)]
    assert missing == [], f"not in docs/running.md: {missing}"


def test_every_make_target_is_documented():
    documented = (DOCS / "running.md").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    targets = phony.group(1).split()
    assert {"run", "test"} <= set(targets)
    missing = [t for t in targets if not re.search(rf"`make {re.escape(t)}\b", documented)]
    assert missing == [], f"not in docs/running.md: {missing}"


def test_the_checks_see_what_they_look_for(tmp_path):
    """The checkers themselves, on bad input, so these tests can fail."""
    assert environment_reads(
        'import os\nenv.int("A", default=1)\nenv("B")\nos.environ.get("C")\nos.environ["D"]\nos.getenv("E")\n'
        'os.environ["F"] = "x"\nos.environ.setdefault("G", "y")\n'
    ) == {"A", "B", "C", "D", "E"}
    assert slug("The `make run` command: step 2 (of 3)") == "the-make-run-command-step-2-of-3"
    assert anchors("# Title\n## Limits\n```\n## not a heading\n```\n## Limits\n") == {"title", "limits", "limits-1"}
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n## Here\n")
    page.write_text(
        "[ok](other.md#here) [gone](missing.md) [bad anchor](other.md#there) [web](https://example.com)\n"
        "`[code](nowhere.md)` [self](#nope)\n"
    )
    found = [b.split(": ", 1)[1] for b in broken_links(page, tmp_path)]
    assert found == [
        "missing.md (no such file)",
        "other.md#there (no heading #there in other.md)",
        "#nope (no heading #nope in page.md)",
    ]
