"""manage.py backup [--output FOLDER]: the database and the audit anchor file, in one folder
(graphadmin.runtime.backup)."""

from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from graphadmin.runtime import backup


class Command(BaseCommand):
    help = "Back up the database (pg_dump, custom format) and the audit anchor file into one folder."

    def add_arguments(self, parser):
        parser.add_argument(
            "--output", help="Folder to create (default: .local/backups/<UTC time>); it must not exist yet."
        )

    def handle(self, *args, output=None, **options):
        folder = Path(output or settings.LOCAL_DIR / "backups" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
        try:
            manifest = backup.backup(folder)
        except FileExistsError as exc:
            raise CommandError(f"{folder} exists already; name a new folder.") from exc
        except Exception as exc:  # pg_dump's own message is the useful part
            raise CommandError(f"Backup failed: {getattr(exc, 'stderr', '') or exc}") from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Backed up database {manifest['database']} ({manifest['dump_bytes']} bytes) and "
                f"{manifest['anchor_lines']} anchor lines into {folder}"
            )
        )
