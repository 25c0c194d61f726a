"""A JSON parser that lets NaN and Infinity through as floats, so the field that carries them is named,
and refuses bodies nested deeper than ``settings.MAX_JSON_DEPTH`` with a 400.

The default parser rejects NaN with a body-level parse error that does not say which field was
wrong; our serializer fields (``FiniteFloatField``, embeddings, JSON values) reject them by name.
A body nested thousands deep made Python's recursive decoder (or the code walking the value later:
serializers, canonical JSON for the audit chain) raise RecursionError, a 500 on every endpoint.
"""

import codecs
import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class FiniteJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            decoded = codecs.getreader(encoding)(stream)
            data = json.load(decoded, parse_constant=float)
        except RecursionError as exc:
            raise ParseError(f"JSON parse error - nested deeper than {settings.MAX_JSON_DEPTH} levels.") from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        if json_depth(data, settings.MAX_JSON_DEPTH) > settings.MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {settings.MAX_JSON_DEPTH} levels.")
        return data


def json_depth(value, stop_after: int) -> int:
    """How deep ``value`` nests lists and objects (a scalar: 0), without recursion; stops past ``stop_after``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > stop_after:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
