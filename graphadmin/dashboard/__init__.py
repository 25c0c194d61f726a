"""The dashboard: server-rendered pages where people audit and tune the graph's weights."""
