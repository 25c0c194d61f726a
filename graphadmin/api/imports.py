"""POST /api/graphs/{graph_pk}/import/: import a zipped Obsidian vault into the graph (operators).

Thin: it checks the role, hands the upload to the parser and the import action, and answers with
the counts. A refused archive (zip-slip, symlink, oversize, no notes) is a 400 and writes nothing.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from graphadmin.vault.load import import_vault
from graphadmin.vault.parse import MAX_ARCHIVE_BYTES, VaultError, parse_vault

from .views import GRAPH_ID, GraphScopedMixin


class VaultUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text=f"The vault as a zip archive (at most {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB)."
    )
    dry_run = serializers.BooleanField(default=False, help_text="Report what would change; write nothing.")
    create_missing = serializers.BooleanField(default=False, help_text="Create placeholder nodes for unresolved links.")

    def validate_file(self, value):
        if value.size > MAX_ARCHIVE_BYTES:
            raise serializers.ValidationError(f"The archive is larger than {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB.")
        return value


class UnresolvedLinkSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="Key of the linking note.")
    target = serializers.CharField(help_text="The link as written.")
    edge_type = serializers.CharField()
    reason = serializers.CharField(help_text="no such note, ambiguous or attachment missing.")
    candidates = serializers.ListField(
        child=serializers.CharField(), help_text="For ambiguous: the notes tied for the link."
    )


class UnresolvedGroupSerializer(serializers.Serializer):
    reason = serializers.CharField()
    count = serializers.IntegerField()
    links = UnresolvedLinkSerializer(many=True)


class ImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    batch = serializers.IntegerField(allow_null=True)
    audit_seq = serializers.IntegerField(allow_null=True)
    embedding = serializers.CharField(help_text="sync, task (Celery queue 'embeddings') or none (dry run).")
    duration_ms = serializers.FloatField()
    counts = serializers.DictField(child=serializers.IntegerField())
    unresolved = UnresolvedLinkSerializer(many=True)
    unresolved_by_reason = UnresolvedGroupSerializer(
        many=True, help_text="The same links grouped by reason: no such note, ambiguous, attachment missing."
    )
    warnings = serializers.ListField(child=serializers.CharField())


class VaultImportView(GraphScopedMixin, GenericAPIView):
    """Import a zipped Obsidian vault into this graph. Operators and admins only; one batch, one audit event."""

    serializer_class = VaultUploadSerializer
    parser_classes = [MultiPartParser]

    @extend_schema(
        parameters=[GRAPH_ID],
        request={"multipart/form-data": VaultUploadSerializer},
        responses={200: ImportResultSerializer, 201: ImportResultSerializer},
    )
    def post(self, request, graph_pk=None):
        upload = self.get_serializer(data=request.data)
        upload.is_valid(raise_exception=True)
        data = upload.validated_data
        try:
            parsed = parse_vault(data["file"], create_missing=data["create_missing"])
        except VaultError as exc:
            raise ValidationError({"file": [str(exc)]}) from exc
        result = import_vault(self.graph(), parsed, request.user, dry_run=data["dry_run"])
        code = status.HTTP_200_OK if result.dry_run else status.HTTP_201_CREATED
        return Response(ImportResultSerializer(result.as_dict()).data, status=code)
