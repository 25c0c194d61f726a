"""manage.py rollback BATCH_ID [--force]: roll back one update batch."""

from django.core.management.base import BaseCommand, CommandError

from feedback import actions
from feedback.models import UpdateBatch


class Command(BaseCommand):
    help = "Roll back an update batch: restore before values; rows changed since are conflicts unless --force."

    def add_arguments(self, parser):
        parser.add_argument("batch_id", type=int)
        parser.add_argument("--force", action="store_true", help="Overwrite rows changed since (audited as forced).")

    def handle(self, *args, batch_id, force=False, **options):
        batch = UpdateBatch.objects.select_related("graph").filter(pk=batch_id).first()
        if batch is None:
            raise CommandError(f"No batch {batch_id}.")
        try:
            result = actions.do_rollback_batch(batch, actor="command:rollback", force=force)
        except actions.RollbackRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"batch {batch_id} rolled back by batch {result.batch_id}: {result.edge_updates} edge and "
            f"{result.node_updates} node change(s), {result.conflicts} conflict(s)"
            + (" overwritten (forced)." if force and result.conflicts else " left alone." if result.conflicts else ".")
        )
        for name, ids in result.details.get("conflict_ids", {}).items():
            self.stdout.write(f"  conflicts {name}: {ids}")
