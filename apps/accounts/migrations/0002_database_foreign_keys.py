"""Foreign keys with the original's ON DELETE behaviour, declared in the database itself.

The models use ``db_constraint=False`` because Django would create these as deferred NO ACTION
constraints and emulate CASCADE / SET NULL in Python only. Account deletion ends with raw
deletes, so the database must cascade (or null) exactly as the original did.
"""

from django.db import migrations

FOREIGN_KEYS = [
    # (table, constraint, column, referenced table, referenced column, on delete)
    ("user_email_claims", "user_email_claims_user_fk", "user_id", "users", "id", "CASCADE"),
    ("password_resets", "password_resets_user_fk", "user_id", "users", "id", "CASCADE"),
    ("email_verifications", "email_verifications_user_fk", "user_id", "users", "id", "CASCADE"),
    ("pending_email_changes", "pending_email_changes_user_fk", "user_id", "users", "id",
     "CASCADE"),
    ("pending_email_claim_releases", "pending_email_claim_rel_user_fk", "user_id", "users", "id",
     "CASCADE"),
    ("passkeys", "passkeys_user_fk", "user_id", "users", "id", "CASCADE"),
    ("oauth_connections", "oauth_connections_user_fk", "user_id", "users", "id", "CASCADE"),
    ("invites", "invites_created_by_fk", "created_by", "users", "id", "SET NULL"),
    ("feature_flags", "feature_flags_updated_by_fk", "updated_by", "users", "id", "SET NULL"),
    ("feature_flag_user_overrides", "feature_flag_overrides_user_fk", "user_id", "users", "id",
     "CASCADE"),
    ("feature_flag_user_overrides", "feature_flag_overrides_updated_by_fk", "updated_by", "users",
     "id", "SET NULL"),
    ("site_banners", "site_banners_created_by_fk", "created_by", "users", "id", "SET NULL"),
    ("site_banners", "site_banners_updated_by_fk", "updated_by", "users", "id", "SET NULL"),
    ("site_banner_dismissals", "site_banner_dismissals_banner_fk", "banner_id", "site_banners",
     "id", "CASCADE"),
    ("site_banner_dismissals", "site_banner_dismissals_user_fk", "user_id", "users", "id",
     "CASCADE"),
]


def _add(table: str, name: str, col: str, ref: str, ref_col: str, action: str) -> str:
    return (
        f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({col}) "
        f"REFERENCES {ref} ({ref_col}) ON DELETE {action}"
    )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [
        migrations.RunSQL(
            sql=_add(*fk), reverse_sql=f"ALTER TABLE {fk[0]} DROP CONSTRAINT {fk[1]}"
        )
        for fk in FOREIGN_KEYS
    ]
