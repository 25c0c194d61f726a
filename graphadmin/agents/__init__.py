"""The agents' side of the service: the MCP server (``mcp_server``, run by ``manage.py mcp_server``), what
every MCP tool body shares (``mcp_tools``), and the Python client of the REST API (``client``).
"""
