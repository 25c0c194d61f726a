"""Every bound an MCP tool's JSON schema states is the bound of the API serializer that validates the call.

The tools validate their arguments with the REST API's serializers (graphadmin.agents.mcp_server builds each
bound from them); an agent reads the schema first. Here every published parameter is matched with its
serializer field, and the schema's bounds (minimum, maximum, minLength, maxLength, minItems,
maxItems, enum) are compared with the field's own attributes, read here without the server's helper.
A tool parameter that states a bound but has no serializer field fails the test, unless listed in
NO_FIELD with the reason.
"""

from __future__ import annotations

import anyio
from rest_framework import serializers as drf

from feedback import serializers as fs
from graphadmin.agents import mcp_server
from ranking import serializers as rs
from ranking.retrieval import MAX_BUDGET_TOKENS, MAX_SEARCH_K

BOUND_KEYS = {"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "enum"}
# tool -> the serializers its body validates with, parameter -> (serializer, field name)
FIELDS = {
    "graph_search": {p: (rs.SearchRequestSerializer, p) for p in ("query", "k", "anchors", "exclude", "persona")},
    "graph_context": {
        p: (rs.ContextRequestSerializer, p)
        for p in (
            "session",
            "query",
            "start_nodes",
            "anchors",
            "exclude",
            "persona",
            "budget_unit",
            "budget",
            "k",
            "hops",
        )
    },
    # The reports name a session graph_context created: its id's bound is the context request's.
    "graph_record_use": {
        "session": (rs.ContextRequestSerializer, "session"),
        "items": (fs.UsesSerializer, "items"),
        "learning_rate": (fs.UsesSerializer, "learning_rate"),
        "response": (fs.ResponseTextSerializer, "response"),
    },
    "graph_improve": {
        "session": (rs.ContextRequestSerializer, "session"),
        "outcome": (fs.OutcomeSerializer, "outcome"),
        "alpha": (fs.OutcomeSerializer, "alpha"),
    },
    "graph_explain": {"i": (rs.ExplainQuerySerializer, "i"), "j": (rs.ExplainQuerySerializer, "j")},
    "graph_remember": {
        p: (fs.RememberSerializer, p) for p in ("text", "kind", "key", "title", "tags", "links", "session")
    },
    "graph_link": {p: (fs.LinkSerializer, p) for p in ("type", "session")},
    "graph_forget": {p: (fs.ForgetSerializer, p) for p in ("nodes", "edges", "session")},
}
# Bounds with no serializer attribute behind them, and why.
NO_FIELD = {
    # ContextRequestSerializer.validate caps the budget by its unit; the schema states the larger cap.
    ("graph_context", "budget"): {"maximum": MAX_BUDGET_TOKENS},
    # The report's idempotency key is cut to 100 characters (feedback.reports), not validated by a serializer.
    ("graph_record_use", "idempotency_key"): {"maxLength": 100},
    ("graph_improve", "idempotency_key"): {"maxLength": 100},
}


def drf_bounds(field) -> dict:
    """The bounds a DRF field enforces, as JSON-schema keywords."""
    out = {}
    if isinstance(field, drf.ChoiceField):
        return {"enum": list(field.choices)}
    if isinstance(field, drf.ListField | drf.ListSerializer):
        names = {"min_length": "minItems", "max_length": "maxItems"}
    elif isinstance(field, drf.CharField):
        names = {"min_length": "minLength", "max_length": "maxLength"}
    else:
        names = {"min_value": "minimum", "max_value": "maximum"}
    for attr, key in names.items():
        if getattr(field, attr, None) is not None:
            out[key] = getattr(field, attr)
    return out


def schema_bounds(prop: dict) -> dict:
    """The bound keywords of one parameter's schema, its own or its non-null alternative's."""
    found = {k: v for k, v in prop.items() if k in BOUND_KEYS}
    for alternative in prop.get("anyOf", []):
        if alternative.get("type") != "null":
            found.update({k: v for k, v in alternative.items() if k in BOUND_KEYS})
    return found


def published_tools() -> dict:
    async def main():
        return await mcp_server.build_server().list_tools()

    return {t.name: t for t in anyio.run(main)}


def test_every_tool_bound_is_its_serializer_fields():
    tools = published_tools()
    assert set(tools) == set(FIELDS)
    mismatches = []
    for name, tool in tools.items():
        for param, prop in tool.input_schema["properties"].items():
            stated = schema_bounds(prop)
            expected = dict(NO_FIELD.get((name, param), {}))
            if param in FIELDS[name]:
                serializer_class, field_name = FIELDS[name][param]
                expected = drf_bounds(serializer_class().fields[field_name]) | expected
            if stated != expected:
                mismatches.append(f"{name}.{param}: schema {stated}, serializer {expected}")
    assert mismatches == [], "\n".join(mismatches)


def test_the_bounds_are_the_documented_ones():
    """A few figures by value, so a serializer and the schema cannot drift together unnoticed."""
    tools = published_tools()
    props = {name: tool.input_schema["properties"] for name, tool in tools.items()}
    assert schema_bounds(props["graph_search"]["k"]) == {"minimum": 1, "maximum": MAX_SEARCH_K}
    assert schema_bounds(props["graph_context"]["session"]) == {"maxLength": 200}
    assert schema_bounds(props["graph_context"]["budget_unit"]) == {"enum": ["items", "tokens"]}
    assert schema_bounds(props["graph_record_use"]["response"]) == {"maxLength": 200_000}
    assert schema_bounds(props["graph_forget"]["nodes"]) == {"maxItems": 50}


def test_the_check_sees_a_bound_the_serializer_does_not_set():
    """The comparison itself: a stated bound the field lacks, or a differing one, is a mismatch."""
    field = rs.SearchRequestSerializer().fields["k"]
    assert drf_bounds(field) == {"minimum": 1, "maximum": MAX_SEARCH_K}
    assert schema_bounds({"anyOf": [{"type": "integer", "maximum": 5}, {"type": "null"}]}) == {"maximum": 5}
    assert drf_bounds(drf.CharField()) == {} != schema_bounds({"type": "string", "maxLength": 10})
