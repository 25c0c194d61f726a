"""What every MCP tool body shares (ranking.mcp, feedback.mcp): the graph through the caller's
tenancy and role (``graphadmin.tenancy``), and input validated by the REST API's own serializers,
refused as a ToolError. The domain errors (``graphadmin.errors``) are mapped by graphadmin.agents.mcp_server.

graphadmin.agents.mcp_server registers the bodies; they are reads or report intake, so they are not ``do_*``.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver.exceptions import ToolError
from rest_framework.utils.encoders import JSONEncoder

from graphadmin.models import Graph
from graphadmin.tenancy import graph_access


def invalid(errors) -> ToolError:
    """The tool error for refused input: the serializer's errors by field, as JSON."""
    return ToolError("Invalid input: " + json.dumps(errors, cls=JSONEncoder, sort_keys=True))


def graph_for(user, graph_id: int, act: str) -> Graph:
    """The graph through the caller's tenancy and role for ``act``: NotFound or Forbidden otherwise."""
    return graph_access(user, graph_id, act).graph


def validated(serializer_class, data: dict, *, request: bool = False):
    """``data`` (None values dropped) validated by ``serializer_class``; its errors as ``invalid``.

    With ``request``, the serializer's request object (``to_request()``) rather than its validated data."""
    serializer = serializer_class(data={k: v for k, v in data.items() if v is not None})
    if not serializer.is_valid():
        raise invalid(serializer.errors)
    return serializer.to_request() if request else serializer.validated_data
