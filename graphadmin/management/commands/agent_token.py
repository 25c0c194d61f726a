"""manage.py agent_token --org SLUG --user NAME [--role ROLE]: a service account's API token, on stdout.

For tools that talk to the service over HTTP (an agent, ``manage.py evaluate_learning``): looks up
or creates the user (no password: it logs in with its token only), gives it a membership with the
role in the organization, and prints a new API token (graphadmin.accounts.create_token: stored hashed,
so an earlier one cannot be shown again; it expires after API_TOKEN_TTL_DAYS) and nothing else, so
``TOKEN=$(manage.py agent_token ...)`` works. A new membership or a changed role is
recorded in the organization's audit chain (``membership.grant``); the organization must exist.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from graphadmin import accounts, actions
from graphadmin.models import Organization
from graphadmin.models.tenancy import ROLES

ACTOR = "command:agent_token"


class Command(BaseCommand):
    help = "Print the API token of a service user with a role in an organization (created if needed)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Slug of an existing organization.")
        parser.add_argument("--user", required=True, help="Username of the service account (created if missing).")
        parser.add_argument(
            "--role",
            choices=ROLES,
            default="agent",
            help="Its role in the organization (default agent: retrieve, and report feedback on the "
            "sessions it created; creating graphs needs admin).",
        )

    def handle(self, *args, org, user, role, **options):
        organization = Organization.objects.filter(slug=org).first()
        if organization is None:
            raise CommandError(f"No organization '{org}' (make run creates 'demo').")
        with transaction.atomic():
            account, created = get_user_model().objects.get_or_create(username=user)
            if created:
                account.set_unusable_password()
                account.save(update_fields=["password"])
            elif not account.is_active:
                raise CommandError(f"User '{user}' is inactive; reactivate it in the admin first.")
            membership, before = actions.do_grant_role(organization, account, role, actor=ACTOR)
            if before != role:
                self.stderr.write(f"{user}: role {role} in {org}" + (f" (was {before})" if before else "") + ".")
            key = accounts.create_token(account)
        self.stdout.write(key)
