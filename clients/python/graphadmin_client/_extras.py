"""Each adapter's framework is imported lazily: without its extra, an ImportError names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"graphadmin_client.{extra.replace('-', '_')} needs {module.split('.')[0]}: "
            f'pip install "graphadmin-client[{extra}]"'
        ) from exc
