"""manage.py verify_audit [--org SLUG]: walk the audit chains; exit non-zero on a broken one."""

from django.core.management.base import BaseCommand, CommandError

from graphadmin import audit
from graphadmin.models import Organization


class Command(BaseCommand):
    help = "Verify the audit hash chain of one organization (--org) or of all of them."

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Organization slug (default: every organization).")

    def handle(self, *args, org=None, **options):
        orgs = Organization.objects.order_by("slug")
        if org:
            orgs = orgs.filter(slug=org)
            if not orgs.exists():
                raise CommandError(f"No organization with slug '{org}'.")
        broken = []
        for organization in orgs:
            result = audit.verify(organization)
            if result.ok:
                self.stdout.write(f"{organization.slug}: ok ({result.count} events)")
            else:
                broken.append(organization.slug)
                self.stdout.write(f"{organization.slug}: BROKEN at seq {result.broken_at}: {result.reason}")
        if broken:
            raise CommandError(f"Broken audit chain in: {', '.join(broken)}")
