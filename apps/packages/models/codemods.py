"""Operator codemod runs over saved packages, and their per-package items."""

from __future__ import annotations

from django.db import models

from kody.fields import (
    created_at,
    json_dict,
    json_list,
    stable_user_id,
    text_id,
    updated_at,
)


class CodemodMode(models.TextChoices):
    SCAN = "scan"
    DRY_RUN = "dry_run"
    APPLY = "apply"
    REVERT = "revert"


class PackageCodemodRun(models.Model):
    id = text_id()
    codemod_id = models.CharField(max_length=128)
    mode = models.CharField(max_length=16, choices=CodemodMode.choices)
    # Both user columns name people but the row is the operator's: rewritten on deletion.
    scope_user_id = stable_user_id(null=True, blank=True)
    initiated_by_user_id = stable_user_id()
    filters_json = json_dict()
    status = models.CharField(max_length=32)
    revert_of_run_id = models.CharField(max_length=64, null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "package_codemod_runs"
        indexes = [
            models.Index(fields=["created_at"], name="pkg_codemod_runs_created_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.codemod_id}:{self.mode}"


class PackageCodemodRunItem(models.Model):
    id = text_id()
    run_id = models.CharField(max_length=64, db_index=True)
    user_id = stable_user_id(db_index=True)
    package_id = models.CharField(max_length=64)
    kody_id = models.CharField(max_length=255)
    status = models.CharField(max_length=32)
    before_commit = models.CharField(max_length=64, null=True, blank=True)
    after_commit = models.CharField(max_length=64, null=True, blank=True)
    changed_paths_json = json_list()
    findings_json = json_list()
    check_summary_json = json_dict()
    error = models.TextField(null=True, blank=True)
    revert_snapshot_key = models.CharField(max_length=1024, null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "package_codemod_run_items"

    def __str__(self) -> str:
        return f"{self.run_id}:{self.kody_id}"
