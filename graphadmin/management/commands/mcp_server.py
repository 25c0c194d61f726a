"""``manage.py mcp_server``: the agents' MCP server (graphadmin.mcp_server), on stdio or streamable HTTP."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from graphadmin import mcp_server


class Command(BaseCommand):
    help = (
        "Serve the graph tools (graph_search, graph_context, graph_record_use, graph_improve, graph_explain) "
        "over MCP. stdio by default, authenticated by --token or GRAPHADMIN_TOKEN; with --http, streamable "
        "HTTP at http://HOST:PORT/mcp where every request carries 'Authorization: Bearer <token>'."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--token", default=None, help="API token (stdio). Default: the GRAPHADMIN_TOKEN environment variable."
        )
        parser.add_argument("--http", action="store_true", help="Serve streamable HTTP instead of stdio.")
        parser.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765).")

    def handle(self, *args, token=None, http=False, host="127.0.0.1", port=8765, **options):
        # stdout is the protocol channel on stdio: logging (settings.LOGGING) and messages go to stderr.
        if http:
            server = mcp_server.build_server(http=True, host=host, port=port)
            self.stderr.write(
                f"graphadmin MCP server: streamable HTTP on http://{host}:{port}/mcp (Bearer token per request)"
            )
            server.run("streamable-http", host=host, port=port)
            return
        token = token or os.environ.get("GRAPHADMIN_TOKEN", "")
        if not token:
            raise CommandError(
                "No token: pass --token or set GRAPHADMIN_TOKEN (create one with manage.py drf_create_token USERNAME)."
            )
        try:
            user = mcp_server.user_for_token(token)
        except mcp_server.NotAuthenticated as exc:
            raise CommandError(str(exc)) from exc
        finally:
            close_old_connections()
        self.stderr.write(f"graphadmin MCP server on stdio, acting as {user.get_username()}")
        mcp_server.build_server(token=token).run("stdio")
