"""The documentation stays honest where that is cheap to check (docs/conventions.md).

- The README stays short: under 220 lines; the manuals live in docs/.
- docs/README.md indexes every page of docs/.
- Every relative link of the README and of every page under docs/ leads to a file that exists and, with an
  ``#anchor``, to a heading of that page.
- Every environment variable the product reads is in docs/configuration.md.
- Every management command and every make target is in docs/running.md.
- Every repository path docs/conventions.md names exists (in its tree, a name under a top folder is looked
  for under that folder), its tree names every module at the root of each app, and every decision record the
  code cites exists.

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
# A repository path in prose: a file name with its extension, or a folder ending in "/", with or without the
# folders before it; not inside a URL or a placeholder (`/api/graphs/{id}/`, `templates/<app>/`), not a dotted
# folder (.venv/, .local/) and not a MIME type in quotes.
REPO_PATH = re.compile(r'(?<![\w./<{:"-])((?:[\w-]+/)*[\w-]+\.(?:py|md|html|toml|json|cfg|ini|txt|sh)\b|(?:[\w-]+/)+)')
# Where a path cannot point: caches and the local state of a checkout.
NOT_REPOSITORY = {".git", ".venv", ".local", "node_modules", "__pycache__"}
DECISION = re.compile(r"docs/decisions/\d{4}-[\w-]+\.md")


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


def repository_names(root: Path) -> set[str]:
    """Every file and folder of the checkout (folders with a trailing "/"), relative to ``root``."""
    names = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if NOT_REPOSITORY & set(rel.parts):
            continue
        names.add(rel.as_posix() + ("/" if path.is_dir() else ""))
    return names


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """The paths a page names that lead nowhere in ``root``.

    A path starting with a top-level folder of the repository must exist as written. In a fenced tree
    (```text), a name on an indented line is under the top folder of the block's last unindented line
    (``settings.py`` under ``graphadmin/``), and is found when some path under that folder ends with it;
    elsewhere a bare name (``permissions.py`` after ``graphadmin/api/views.py``) is found when some path of
    the repository ends with it.
    """
    names = repository_names(root)
    tops = {n.split("/")[0] for n in names}

    def found(token: str, under: str) -> bool:
        if "/" in token and token.split("/")[0] in tops:
            return (root / token).exists()
        prefix = under if under else ""
        return any(n.startswith(prefix) and (n == prefix + token or n.endswith("/" + token)) for n in names)

    missing = []
    in_block, top = False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            in_block, top = not in_block, ""
            continue
        if in_block and line.strip() and not line.startswith(" "):
            first = line.split()[0].rstrip(",")
            top = first if first.endswith("/") else ""
        under = top if in_block and line.startswith(" ") else ""
        where = under or "repository"
        missing += [f"{token} ({where})" for token in REPO_PATH.findall(line) if not found(token, under)]
    return missing


# Modules every Django app has, that the tree need not name.
UNLISTED = {"__init__.py", "apps.py"}


def unlisted_modules(text: str, root: Path = ROOT, apps: tuple[str, ...] = APPS) -> list[str]:
    """The modules at the root of each app (``graphadmin/tenancy.py``) that no line of the page's fenced tree
    names under that app's top line: the tree lists where code goes, so a module it leaves out has no place."""
    named: dict[str, set[str]] = {}
    in_block, top = False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            in_block, top = not in_block, ""
            continue
        if not in_block or not line.strip():
            continue
        if not line.startswith(" "):
            first = line.split()[0].rstrip(",")
            top = first.rstrip("/") if first.endswith("/") else ""
        named.setdefault(top, set()).update(token.rsplit("/", 1)[-1] for token in REPO_PATH.findall(line))
    return [
        f"{app}/{path.name}"
        for app in apps
        for path in sorted((root / app).glob("*.py"))
        if path.name not in UNLISTED and path.name not in named.get(app, set())
    ]


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
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    broken = [b for page in pages for b in broken_links(page)]
    assert broken == [], "\n".join(broken)


def test_every_path_the_conventions_name_exists():
    text = (DOCS / "conventions.md").read_text()
    assert len(REPO_PATH.findall(text)) > 100  # the page's tree and prose are read, not skipped
    missing = missing_paths(text)
    assert missing == [], "docs/conventions.md names paths that do not exist: " + ", ".join(missing)


def test_the_conventions_tree_names_every_module_of_each_app():
    unlisted = unlisted_modules((DOCS / "conventions.md").read_text())
    assert unlisted == [], "docs/conventions.md's tree (The modules) leaves out: " + ", ".join(unlisted)


def test_every_decision_the_code_cites_exists():
    sources = [*product_modules(), *sorted((ROOT / "bench").glob("*.py"))]
    cited = {(m, p.relative_to(ROOT)) for p in sources for m in DECISION.findall(p.read_text())}
    assert cited, "no code cites a decision record"
    missing = sorted(f"{m} (cited in {p})" for m, p in cited if not (ROOT / m).exists())
    assert missing == [], ", ".join(missing)


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
    (tmp_path / "app" / "sub").mkdir(parents=True)
    (tmp_path / "templates").mkdir()
    (tmp_path / "app" / "here.py").write_text("")
    (tmp_path / "app" / "sub" / "deep.py").write_text("")
    page_text = (
        "`app/here.py`, `app/gone.py`, `here.py`, `nowhere.py`, `app/sub/`, `app/none/`, `.venv/bin/python`,\n"
        '`/api/graphs/{id}/items/`, `templates/<app>/`, `type="application/json"`\n'
        "```text\napp/          the app\n  here.py    ok\n  sub/       deep.py, lost.py\n```\n"
    )
    assert missing_paths(page_text, tmp_path) == [
        "app/gone.py (repository)",
        "nowhere.py (repository)",
        "app/none/ (repository)",
        "lost.py (app/)",
    ]
    (tmp_path / "app" / "apps.py").write_text("")
    (tmp_path / "app" / "left_out.py").write_text("")
    (tmp_path / "app" / "sub" / "here.py").write_text("")
    assert unlisted_modules(page_text, tmp_path, ("app",)) == ["app/left_out.py"]
    assert unlisted_modules(page_text.replace("  here.py    ok\n", ""), tmp_path, ("app",)) == [
        "app/here.py",
        "app/left_out.py",
    ]
    assert found == [
        "missing.md (no such file)",
        "other.md#there (no heading #there in other.md)",
        "#nope (no heading #nope in page.md)",
    ]
