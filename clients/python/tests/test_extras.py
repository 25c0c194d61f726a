"""Without its framework, each adapter's import fails with an ImportError naming the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

ADAPTERS = {
    "langchain": ("langchain_core", "langchain"),
    "langgraph": ("langgraph", "langgraph"),
    "llamaindex": ("llama_index", "llamaindex"),
    "openai_agents": ("agents", "openai-agents"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
}


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_the_import_error_names_the_extra(module):
    framework, extra = ADAPTERS[module]
    # A None in sys.modules makes `import framework` raise ImportError, installed or not.
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"try:\n    import graphadmin_client.{module}\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f'pip install "graphadmin-client[{extra}]"' in out
