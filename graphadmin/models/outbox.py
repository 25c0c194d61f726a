"""The task outbox: a Celery task that must not be lost is a row until a worker has run it."""

from django.db import models
from django.utils import timezone


class OutboxTask(models.Model):
    """One task to run (decay, normalize, a vault import, embedding), stored in the caller's transaction.

    ``graphadmin.outbox`` sends it on commit and deletes the row when a worker has run it; a row
    still here past ``not_before`` (the broker was down when it was sent, or the worker died with
    it) is sent again by the beat sweeper, under the same task id.
    """

    task_id = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    queue = models.CharField(max_length=100, blank=True)
    # Seconds a sent task may take before the sweeper counts it lost and sends it again.
    lease_seconds = models.PositiveIntegerField(default=900)
    state = models.CharField(max_length=10, default="pending", choices=[("pending", "pending"), ("failed", "failed")])
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    not_before = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["not_before"], name="outboxtask_due", condition=models.Q(state="pending"))]

    def __str__(self):
        return f"{self.name} {self.task_id} ({self.state})"
