"""The role ``storageQuery`` runs agents' SQL as (ADR 0054): no privilege on any table or
schema beyond what PUBLIC has, so the SQL sees only the bucket handed to it as a parameter.
Roles are cluster-wide, hence IF NOT EXISTS; the app's own user must be a member to SET ROLE."""

from django.db import migrations

CREATE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kody_bucket_query') THEN
        CREATE ROLE kody_bucket_query NOLOGIN NOINHERIT;
    END IF;
END
$$;
GRANT kody_bucket_query TO CURRENT_USER;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0004_job_disabled_reason")]

    operations = [migrations.RunSQL(CREATE, reverse_sql=migrations.RunSQL.noop)]
