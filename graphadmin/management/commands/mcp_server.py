"""``manage.py mcp_server``: the agents' MCP server (graphadmin.agents.mcp_server), on stdio or streamable HTTP.

HTTP is served by uvicorn (the MCP SDK's app, behind graphadmin.agents.mcp_server.BadTokenGate), which stops
gracefully on SIGTERM or Ctrl-C. DNS-rebinding protection is on for every bind address:
``--allowed-hosts`` / ``MCP_ALLOWED_HOSTS`` name the extra ``Host`` values to accept (a reverse proxy's
public name), ``--allowed-origins`` / ``MCP_ALLOWED_ORIGINS`` the extra browser origins (docs/agents.md,
"Transport security").
"""

from __future__ import annotations

import os

import uvicorn
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from graphadmin.agents import mcp_server


class Command(BaseCommand):
    help = (
        "Serve the graph tools (graph_search, graph_context, graph_record_use, graph_improve, graph_explain) "
        "over MCP. stdio by default, authenticated by --token or GRAPHADMIN_TOKEN; with --http, streamable "
        "HTTP at http://HOST:PORT/mcp where every request carries 'Authorization: Bearer <token>' and a Host "
        "header that is a loopback name, HOST:PORT or one of --allowed-hosts."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--token", default=None, help="API token (stdio). Default: the GRAPHADMIN_TOKEN environment variable."
        )
        parser.add_argument("--http", action="store_true", help="Serve streamable HTTP instead of stdio.")
        parser.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765).")
        parser.add_argument(
            "--allowed-hosts",
            default=os.environ.get("MCP_ALLOWED_HOSTS", ""),
            help="HTTP: comma-separated Host header values accepted besides the loopback names and HOST:PORT, "
            "e.g. graph.example.com (any port) or graph.example.com:8443. Default: MCP_ALLOWED_HOSTS.",
        )
        parser.add_argument(
            "--allowed-origins",
            default=os.environ.get("MCP_ALLOWED_ORIGINS", ""),
            help="HTTP: comma-separated browser origins accepted besides the loopback ones, "
            "e.g. https://graph.example.com. Default: MCP_ALLOWED_ORIGINS.",
        )

    def handle(
        self,
        *args,
        token=None,
        http=False,
        host="127.0.0.1",
        port=8765,
        allowed_hosts="",
        allowed_origins="",
        **options,
    ):
        # stdout is the protocol channel on stdio: logging (settings.LOGGING) and messages go to stderr.
        if http:
            try:
                security = mcp_server.transport_security(host, port, _split(allowed_hosts), _split(allowed_origins))
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            server = mcp_server.build_server(http=True, host=host, port=port)
            self.stderr.write(
                f"graphadmin MCP server: streamable HTTP on http://{host}:{port}/mcp (Bearer token per request; "
                f"Host accepted: {', '.join(security.allowed_hosts)})"
            )
            app = mcp_server.http_app(server, host=host, transport_security=security)
            # log_config=None: uvicorn's lines go through settings.LOGGING too (JSON or text, with the rest).
            uvicorn.run(app, host=host, port=port, log_config=None, log_level="info")
            return
        token = token or os.environ.get("GRAPHADMIN_TOKEN", "")
        if not token:
            raise CommandError(
                "No token: pass --token or set GRAPHADMIN_TOKEN (create one with manage.py create_token USERNAME)."
            )
        try:
            user = mcp_server.user_for_token(token)
        except mcp_server.NotAuthenticated as exc:
            raise CommandError(str(exc)) from exc
        finally:
            close_old_connections()
        self.stderr.write(f"graphadmin MCP server on stdio, acting as {user.get_username()}")
        mcp_server.build_server(token=token).run("stdio")


def _split(value: str) -> list[str]:
    """The entries of a comma-separated option, blanks dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]
