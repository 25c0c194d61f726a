"""manage.py restore FOLDER: load a backup (manage.py backup) into the empty configured database, put its
anchor file in place, and verify every audit chain against the anchors (graphadmin.runtime.backup)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from graphadmin import audit
from graphadmin.models import Organization
from graphadmin.runtime import backup


class Command(BaseCommand):
    help = "Restore a backup folder into the empty configured database and verify the audit chains."

    def add_arguments(self, parser):
        parser.add_argument("folder", help="A folder written by manage.py backup.")

    def handle(self, *args, folder, **options):
        try:
            done = backup.restore(Path(folder))
        except (FileNotFoundError, RuntimeError) as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:
            raise CommandError(f"Restore failed: {getattr(exc, 'stderr', '') or exc}") from exc
        self.stdout.write(f"Restored into {done['database']}; anchors: {done['anchors']}.")
        broken = []
        for organization in Organization.objects.order_by("slug"):
            result = audit.verify(organization)
            self.stdout.write(
                f"{organization.slug}: {'ok' if result.ok else 'BROKEN'} ({result.count} events)"
                + ("" if result.ok else f" at seq {result.broken_at}: {result.reason}")
            )
            if not result.ok:
                broken.append(organization.slug)
        if broken:
            raise CommandError(f"Restored, but the audit chain does not verify in: {', '.join(broken)}")
        self.stdout.write(self.style.SUCCESS("Every audit chain verifies against its anchors."))
