"""manage.py create_token USERNAME [--days N]: a new API token for an existing user, on stdout.

The key is printed once and stored only as a digest (django-rest-knox); it expires after ``--days``
(default API_TOKEN_TTL_DAYS). A user may hold several tokens; changing the password deletes them all.
For a service account with a role in an organization, ``manage.py agent_token`` does both steps.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from graphadmin import accounts


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (shown once; stored hashed; expires)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--days", type=float, default=None, help="Days until it expires (default API_TOKEN_TTL_DAYS)."
        )

    def handle(self, *args, username, days, **options):
        user = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None or not user.is_active:
            raise CommandError(f"No active user '{username}'.")
        if days is not None and days <= 0:
            raise CommandError("--days must be positive.")
        self.stdout.write(accounts.create_token(user, ttl=timedelta(days=days) if days else None))
