"""The append-only, hash-chained audit log, one chain per organization.

Database triggers refuse UPDATE and DELETE on this table; appends and verification live in
``graphadmin.audit``.
"""

from __future__ import annotations

from django.db import models

from .tenancy import Organization, TenantQuerySet


class AuditEvent(models.Model):
    """One administrative act: seq, time, actor, action, scope, payload, prev_hash and hash."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="audit_events")
    seq = models.BigIntegerField()
    created_at = models.DateTimeField()
    actor = models.CharField(max_length=200, help_text="'user:<username>', 'task:<name>' or 'command:<name>'.")
    action = models.CharField(max_length=100)
    scope = models.JSONField(default=dict, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "seq"], name="audit_seq_per_org")]
        ordering = ["organization", "seq"]
        indexes = [models.Index(fields=["organization", "action"], name="audit_org_action")]

    def __str__(self):
        return f"#{self.seq} {self.action} by {self.actor}"


class AuditCheckpoint(models.Model):
    """The last link verified by a full walk of an organization's chain.

    Pages verify incrementally from here (cheap at any chain length); the periodic task and the
    command walk the whole chain again and move the checkpoint, so an edit behind it is still caught.
    """

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="audit_checkpoint"
    )
    seq = models.BigIntegerField()
    hash = models.CharField(max_length=64)
    verified_at = models.DateTimeField()
