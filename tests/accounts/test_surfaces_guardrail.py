"""Guardrails over the real, migrated database.

1. Every shared table the original had (shared/SCHEMA.md §1.2–1.4 and §8) exists.
2. Every table with a user-ownership column is declared in apps/accounts/surfaces.py — as a
   deletion/export target, as operator-owned, or as global — and every declaration names a
   table and columns that really exist. Adding a model therefore forces a decision about
   account deletion and export.
"""

from __future__ import annotations

import re

import pytest
from django.db import connections

from apps.accounts import out_of_band_surfaces, surfaces

# The original's roles/permissions/role_permissions/user_roles are Django's auth tables here.
SCHEMA_MD_TABLES = """
account_write_lease_repairs agent_package_conversation_uses archived_job_artifacts
community_activity_events community_bans community_forks community_listings
community_ratings community_reports community_stars d1_storage_reconcile_cursor
email_delivery_alert_events email_inbound_due_owners email_inbox_addresses email_inboxes
email_outbound_provider_index email_outbound_provider_index_repair_owners
email_sender_identities email_sender_rules email_user_graph_authority email_verifications
entity_source_artifacts_push_subscriptions entity_sources feature_flag_exposure_rollups
feature_flag_user_overrides feature_flags invites jobs jobs_worker_state mcp_agent_sessions
mcp_memories mcp_memory_conversation_suppressions mcp_server_settings
mcp_user_server_instructions oauth_connections package_codemod_run_items
package_codemod_runs package_invocation_tokens package_kody_id_redirects
package_scope_grants package_service_states passkeys password_resets pending_email_changes
platform_feedback platform_oauth_apps published_bundle_artifacts remote_connector_settings
repo_session_due_owners repo_session_storage_bucket_cursor saved_package_search_index_debt
saved_packages secret_buckets secret_entries stripe_webhook_events system_email_attachments
system_email_daily_counters system_email_delivery_events system_email_graph_authority
system_email_messages system_email_threads usage_rollups user_follows user_integrations
user_oauth_apps user_openapi_binding_operations user_openapi_bindings user_repos
user_storage_buckets username_redirects users value_buckets value_entries verifications
webhook_endpoints
compute_overage_invoices package_share_grants platform_provider_marks referrals
secret_provider_bindings secret_provider_grants site_banner_dismissals site_banners
user_email_claims user_tips_email_opt_outs user_usage_campaign_sends user_usage_campaigns
vector_embed_fingerprints
""".split()


OWNERSHIP_COLUMN = re.compile(r"^(user_id|.+_user_id|owner_.+)$")


def _columns_by_table(alias: str = "default") -> dict[str, set[str]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            """
            SELECT table_name, column_name FROM information_schema.columns
            WHERE table_schema = 'public'
            """
        )
        result: dict[str, set[str]] = {}
        for table, column in cursor.fetchall():
            result.setdefault(table, set()).add(column)
    return result


pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def columns() -> dict[str, set[str]]:
    found = _columns_by_table("default")
    for table, cols in _columns_by_table("audit").items():
        found.setdefault(table, set()).update(cols)
    return found


def test_every_table_of_the_original_exists(columns):
    missing = sorted(set(SCHEMA_MD_TABLES) - set(columns))
    assert missing == [], f"tables from SCHEMA.md missing after migrate: {missing}"


def test_audit_events_live_only_in_the_audit_database():
    assert "audit_events" in _columns_by_table("audit")
    assert "audit_events" not in _columns_by_table("default")


def test_roles_and_permissions_are_djangos_auth_tables(columns):
    assert {"auth_group", "auth_permission", "auth_group_permissions"} <= set(columns)


def test_every_user_owned_table_is_declared(columns):
    undeclared = sorted(
        table
        for table, cols in columns.items()
        if any(OWNERSHIP_COLUMN.match(col) for col in cols)
        and table not in surfaces.declared_tables()
        and not table.startswith(("django_", "auth_"))
    )
    assert undeclared == [], (
        "tables with a user-ownership column must be declared in apps/accounts/surfaces.py "
        f"(target, operator-owned or global): {undeclared}"
    )


def test_declarations_name_real_tables_and_columns(columns):
    stale = []
    for target in surfaces.USER_TABLE_TARGETS:
        if target.table not in columns:
            stale.append(target.table)
            continue
        stale += [f"{target.table}.{c}" for c in target.columns if c not in columns[target.table]]
        stale += [f"{target.table}.{c}" for c in target.redact if c not in columns[target.table]]
    for excluded in (
        *surfaces.OPERATOR_OWNED_TABLES,
        *surfaces.GLOBAL_TABLES,
        *surfaces.KERNEL_TABLES,
    ):
        if excluded.table not in columns:
            stale.append(excluded.table)
    assert stale == [], f"surfaces.py names tables/columns that do not exist: {stale}"


def test_a_table_is_declared_once():
    names = [t.table for t in (*surfaces.OPERATOR_OWNED_TABLES, *surfaces.GLOBAL_TABLES)]
    assert len(names) == len(set(names))
    assert not set(names) & surfaces.target_tables()


def test_exclusions_give_a_reason():
    assert all(t.reason.strip() for t in (*surfaces.OPERATOR_OWNED_TABLES, *surfaces.GLOBAL_TABLES))


# --- actors --------------------------------------------------------------------------------

# The kernel's own actors hold no user data of their own (alarms are re-armed by their owners).
KERNEL_ACTORS = {"kody.AlarmClock"}


def _product_actors() -> dict[str, type]:
    from kody.actors.base import _registry
    from kody.discovery import autodiscover

    autodiscover()
    return {
        name: actor
        for name, actor in _registry.items()
        if name not in KERNEL_ACTORS and not actor.__module__.startswith("tests.")
    }


def test_every_product_actor_registers_deletion_and_export_hooks():
    from apps.accounts.actor_surfaces import actor_surfaces

    registered = actor_surfaces()
    actors = _product_actors()
    assert actors, "no product actor was discovered"
    missing = sorted(set(actors) - set(registered))
    assert not missing, f"actors without an ActorSurface (apps/accounts/surfaces.py): {missing}"
    stale = sorted(set(registered) - set(actors))
    assert not stale, f"ActorSurface entries for actors that do not exist: {stale}"


def test_every_actor_hook_is_an_exposed_deletion_safe_method():
    from apps.accounts.actor_surfaces import actor_surfaces
    from kody.actors import is_deletion_safe

    actors = _product_actors()
    for name, surface in actor_surfaces().items():
        actor = actors[name]
        for hook in filter(None, (surface.purge, surface.export_pages, surface.blob_references)):
            assert hook in actor.exposed_methods(), f"{name}.{hook} is not callable"
            assert is_deletion_safe(actor, hook), f"{name}.{hook} lacks @deletion_safe"


def test_every_product_actor_table_is_created_on_first_use_or_eager_with_a_reason():
    from apps.accounts.actor_surfaces import EAGER_ACTOR_APPS
    from kody.userschema import actor_models, tablesets

    _product_actors()
    lazy = frozenset().union(*tablesets.sets().values())
    undecided = sorted(
        model._meta.db_table
        for model in actor_models()
        if model.__module__.startswith("apps.")
        and model._meta.db_table not in lazy
        and model._meta.app_label not in EAGER_ACTOR_APPS
    )
    assert not undecided, (
        f"actor tables neither in an actor's `tables` nor in EAGER_ACTOR_APPS: {undecided}"
    )
    assert all(reason.strip() for reason in EAGER_ACTOR_APPS.values())


# --- blob and KV key families --------------------------------------------------------------


def _family(pattern: str) -> re.Pattern[str]:
    """A declared prefix with ``{placeholders}`` as a regex matching the start of a key."""
    parts = re.split(r"\{[A-Za-z]+\}", pattern)
    return re.compile("^" + "[^/:]+".join(re.escape(part) for part in parts))


def _built_blob_keys() -> dict[str, str]:
    """One key or prefix from every builder in kody.blobs.keys, with made-up segments."""
    import inspect

    from kody.blobs import keys

    built = {}
    for name, function in inspect.getmembers(keys, inspect.isfunction):
        if name.startswith("_") or function.__module__ != keys.__name__:
            continue
        arguments = {
            parameter: ("png" if parameter == "extension" else f"seg{n}")
            for n, parameter in enumerate(inspect.signature(function).parameters)
        }
        built[name] = function(**arguments)
    return built


def test_every_blob_key_builder_falls_under_a_declared_prefix():
    declared = [_family(p) for p in out_of_band_surfaces.declared_prefixes("blob_prefix")]
    built = _built_blob_keys()
    assert built, "no blob key builders found"
    undeclared = sorted(
        name for name, key in built.items() if not any(f.match(key) for f in declared)
    )
    assert undeclared == [], (
        f"blob keys with no declared prefix in out_of_band_surfaces.py: {undeclared}"
    )


def test_every_declared_blob_prefix_is_built_somewhere():
    built = list(_built_blob_keys().values())
    stale = [
        pattern
        for pattern in out_of_band_surfaces.declared_prefixes("blob_prefix")
        if not any(_family(pattern).match(key) for key in built)
    ]
    assert stale == [], f"declared blob prefixes no key builder produces: {stale}"


def test_every_declared_blob_prefix_names_a_real_bucket():
    from config.buckets import BUCKETS

    for surface in out_of_band_surfaces.OUT_OF_BAND_SURFACES:
        if surface.kind == "blob_prefix":
            assert surface.extra.get("bucket") in BUCKETS, surface.name


def test_user_scoped_kv_families_and_declarations_match():
    from kody.kv import keys

    built = {prefix.replace("seg", "{userId}") for prefix in keys.user_prefixes("seg")}
    declared = set(out_of_band_surfaces.declared_prefixes("kv_prefix"))
    assert built == declared, f"KV families built {sorted(built)} vs declared {sorted(declared)}"
