"""Template helpers for the dashboard."""

from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """mapping[key], or None: lets templates read dict entries by a variable name."""
    return mapping.get(key) if hasattr(mapping, "get") else None
