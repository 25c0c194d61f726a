"""manage.py anchor_audit [--org SLUG]: verify each chain, advance its checkpoint and anchor its head outside
the database (what the hourly ``verify_audit_chains`` task does); exit non-zero on a broken chain."""

from django.core.management.base import BaseCommand, CommandError

from graphadmin import anchor, audit
from graphadmin.models import Organization


class Command(BaseCommand):
    help = "Verify the audit chains, move their checkpoints and append their heads to the anchor file / log sink."

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Organization slug (default: every organization).")

    def handle(self, *args, org=None, **options):
        orgs = Organization.objects.order_by("slug")
        if org:
            orgs = orgs.filter(slug=org)
            if not orgs.exists():
                raise CommandError(f"No organization with slug '{org}'.")
        results = audit.anchor_heads(list(orgs))
        broken = [slug for slug, result in results.items() if not result.ok]
        for slug, result in results.items():
            if result.ok:
                self.stdout.write(f"{slug}: anchored at seq {result.count}" if result.count else f"{slug}: no events")
            else:
                self.stdout.write(f"{slug}: BROKEN at seq {result.broken_at}: {result.reason} (not anchored)")
        self.stdout.write(f"Anchor file: {anchor.anchor_file() or '(none)'}")
        if broken:
            raise CommandError(f"Broken audit chain in: {', '.join(broken)}")
