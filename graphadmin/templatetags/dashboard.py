"""Template helpers for the dashboard."""

from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """mapping[key], or None: lets templates read dict entries by a variable name."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def percent(share, digits=1):
    """A share in [0, 1] as a percentage ("12.5%"), "—" for None (nothing to divide by)."""
    if share is None:
        return "—"
    return f"{share * 100:.{int(digits)}f}%"
