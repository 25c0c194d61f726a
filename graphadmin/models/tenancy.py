"""Organizations (the tenants), memberships and roles, and the queryset that carries tenancy."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# Ordered from least to most privileged. From reviewer up, each role can do everything the previous
# one can. ``agent`` (the service accounts agents use) comes first and inherits nothing: it reads no
# page and may do only the acts ``graphadmin.tenancy.AGENT_ACTS`` names (retrieve, log its context,
# report on the sessions it created).
ROLES = ("agent", "reviewer", "analyst", "operator", "admin")


class TenantQuerySet(models.QuerySet):
    """The one queryset that carries tenancy, for every model that belongs to an organization.

    ``for_user`` keeps only rows in organizations the user is a member of, optionally only where
    the user's role is at least ``role``; with ``or_own`` (the path from the row to a session's
    owner, e.g. ``session__owner``) also the rows of the user's own sessions whatever the role (an
    agent reads what its sessions caused). Every view starts from it, so none can forget the tenant.
    The path to the organization follows from the model: the organization itself, a model with an
    ``organization`` foreign key, or one with a ``graph`` foreign key (``graph__organization``).
    """

    @property
    def org_path(self) -> str:
        names = {f.name for f in self.model._meta.get_fields()}
        if self.model is Organization:
            return ""
        if "organization" in names:
            return "organization"
        if "graph" in names:
            return "graph__organization"
        raise TypeError(f"{self.model.__name__} has no path to an organization.")

    def for_user(self, user, role: str | None = None, *, or_own: str | None = None):
        if user is None or not user.is_authenticated:
            return self.none()
        roles = ROLES[ROLES.index(role) :] if role else ROLES
        prefix = f"{self.org_path}__" if self.org_path else ""
        member = models.Q(**{f"{prefix}memberships__user": user})
        allowed = models.Q(**{f"{prefix}memberships__role__in": roles})
        if or_own:
            allowed |= models.Q(**{or_own: user})
        # One filter() call: both conditions are on the same membership row (the user's own).
        return self.filter(member & allowed)

    def with_role(self, user):
        """``for_user``, each row annotated with the user's role in its organization as ``user_role`` (one query)."""
        memberships = Membership.objects.filter(
            user_id=getattr(user, "pk", None), organization=models.OuterRef(self.org_path or "pk")
        )
        role = memberships.values("role")[:1]
        return self.for_user(user).annotate(user_role=models.Subquery(role))


class Organization(models.Model):
    """A tenant. Users see and touch only the data of organizations they are members of."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    def __str__(self):
        return self.slug


class Membership(models.Model):
    """A user's role in one organization: agent (a service account), reviewer, analyst, operator or admin."""

    ROLE_CHOICES = [(r, r) for r in ROLES]

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=ROLE_CHOICES)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="membership_one_per_org"),
            models.CheckConstraint(condition=models.Q(role__in=ROLES), name="membership_role_valid"),
        ]

    def __str__(self):
        return f"{self.user} @ {self.organization} ({self.role})"
