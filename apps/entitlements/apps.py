from django.apps import AppConfig


class EntitlementsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.entitlements"
    label = "entitlements"
    verbose_name = "Entitlements"

    def ready(self) -> None:
        from apps.accounts import policy
        from apps.entitlements import signals
        from apps.entitlements.services import count_limit, metering

        signals.connect()
        # The account write leases live in the UserMeter: the policy guards writes with them.
        policy.register_write_leases(metering)
        # Apps below this one (packages) hold plan count limits through the policy.
        policy.register_count_limits(count_limit)
        # … and reserve/release storage bytes for writes that grow or shrink what they store.
        from apps.entitlements.services import release_storage_bytes, reserve_storage_bytes

        policy.register_storage_meter(reserve_storage_bytes, release_storage_bytes)
