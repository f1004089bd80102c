"""Foreign keys Django cannot declare with the original's ON DELETE behaviour.

* Composite keys: user_integrations (user_id, app_slug) → user_oauth_apps (user_id, slug)
  RESTRICT, and user_openapi_binding_operations (user_id, binding_name) →
  user_openapi_bindings (user_id, name) CASCADE.
* Single-column FKs whose models use ``db_constraint=False``: Django would create them as
  deferred NO ACTION; the original cascades (or restricts) in the database itself, so raw
  deletes — e.g. account deletion's batch — behave the same as ORM deletes.
"""

from django.db import migrations

FOREIGN_KEYS = [
    # (table, constraint, columns, referenced table, referenced columns, on delete)
    ("user_integrations", "user_integrations_app_fk", "user_id, app_slug",
     "user_oauth_apps", "user_id, slug", "RESTRICT"),
    ("user_integrations", "user_integrations_platform_app_fk", "platform_app_slug",
     "platform_oauth_apps", "slug", "RESTRICT"),
    ("user_openapi_binding_operations", "user_openapi_binding_ops_binding_fk",
     "user_id, binding_name", "user_openapi_bindings", "user_id, name", "CASCADE"),
    ("mcp_memory_conversation_suppressions", "mcp_memory_suppressions_memory_fk", "memory_id",
     "mcp_memories", "id", "CASCADE"),
    ("value_entries", "value_entries_bucket_fk", "bucket_id", "value_buckets", "id", "CASCADE"),
    ("secret_entries", "secret_entries_bucket_fk", "bucket_id", "secret_buckets", "id", "CASCADE"),
    ("secret_provider_grants", "secret_provider_grants_binding_fk", "binding_id",
     "secret_provider_bindings", "id", "CASCADE"),
]


def _add(table: str, name: str, cols: str, ref: str, ref_cols: str, action: str) -> str:
    return (
        f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({cols}) "
        f"REFERENCES {ref} ({ref_cols}) ON DELETE {action}"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("packages", "0001_initial"),
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            sql=_add(*fk), reverse_sql=f"ALTER TABLE {fk[0]} DROP CONSTRAINT {fk[1]}"
        )
        for fk in FOREIGN_KEYS
    ]
