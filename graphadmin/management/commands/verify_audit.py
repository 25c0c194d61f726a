"""manage.py verify_audit [--org SLUG] [--checkpoint]: walk the audit chains; exit non-zero on a broken one.

Read-only unless ``--checkpoint``: then each chain that holds gets its checkpoint moved to its head (what the
hourly task does).
"""

from django.core.management.base import BaseCommand, CommandError

from graphadmin import audit
from graphadmin.models import Organization


class Command(BaseCommand):
    help = "Verify the audit hash chain of one organization (--org) or of all of them."

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Organization slug (default: every organization).")
        parser.add_argument(
            "--checkpoint", action="store_true", help="Move the checkpoint of each chain that holds to its head."
        )

    def handle(self, *args, org=None, checkpoint=False, **options):
        orgs = Organization.objects.order_by("slug")
        if org:
            orgs = orgs.filter(slug=org)
            if not orgs.exists():
                raise CommandError(f"No organization with slug '{org}'.")
        broken = []
        for organization in orgs:
            result = audit.advance_checkpoint(organization) if checkpoint else audit.verify(organization)
            if result.ok:
                self.stdout.write(f"{organization.slug}: ok ({result.count} events)")
            else:
                broken.append(organization.slug)
                self.stdout.write(f"{organization.slug}: BROKEN at seq {result.broken_at}: {result.reason}")
        if broken:
            raise CommandError(f"Broken audit chain in: {', '.join(broken)}")
