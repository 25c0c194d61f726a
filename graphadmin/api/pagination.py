"""The API's pagination: ``?limit=`` and ``?offset=`` with a documented maximum (docs/api.md, "Limits").

DRF's LimitOffsetPagination clamps a limit above ``max_limit`` silently and reads a bad number as
the default; here either is a 400 naming the parameter, so a caller learns the bound instead of
silently getting fewer rows than asked for. The schema carries the bounds.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.pagination import LimitOffsetPagination

from graphadmin.params import BIGINT_MAX, parse_int


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """``limit`` 1..API_MAX_PAGE_SIZE (default API_PAGE_SIZE), ``offset`` 0..bigint; otherwise a 400."""

    @property
    def default_limit(self):
        return settings.API_PAGE_SIZE

    @property
    def max_limit(self):
        return settings.API_MAX_PAGE_SIZE

    def get_limit(self, request):
        raw = request.query_params.get(self.limit_query_param, "")
        if not raw:
            return self.default_limit
        return parse_int(raw, self.limit_query_param, low=1, high=self.max_limit)

    def get_offset(self, request):
        raw = request.query_params.get(self.offset_query_param, "")
        if not raw:
            return 0
        return parse_int(raw, self.offset_query_param, low=0, high=BIGINT_MAX)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit, "default": self.default_limit},
            self.offset_query_param: {"minimum": 0, "maximum": BIGINT_MAX},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
            if parameter["name"] == self.limit_query_param:
                parameter["description"] = f"Rows per page, at most {self.max_limit} (a larger value is a 400)."
        return parameters
