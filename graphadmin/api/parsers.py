"""A JSON parser that lets NaN and Infinity through as floats, so the field that carries them is named.

The default parser rejects them with a body-level parse error that does not say which field was
wrong; our serializer fields (``FiniteFloatField``, embeddings, JSON values) reject them by name.
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
            return json.load(decoded, parse_constant=float)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
