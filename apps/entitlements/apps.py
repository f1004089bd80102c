from django.apps import AppConfig


class EntitlementsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.entitlements"
    label = "entitlements"
    verbose_name = "Entitlements"

    def ready(self) -> None:
        from apps.accounts import policy
        from apps.entitlements import signals
        from apps.entitlements.services import (
            count_limit,
            gifts,
            metering,
            release_storage_bytes,
            reserve_storage_bytes,
        )

        signals.connect()
        # The account write leases live in the UserMeter: the policy guards writes with them.
        policy.register_write_leases(metering)
        # Apps that reach entitlements through the policy: plan count limits, the second-agent
        # gift, and storage bytes reserved and released by writes that grow or shrink storage.
        policy.register_count_limits(count_limit)
        policy.register_first_mcp_client_use(gifts.settle_second_agent_gift)
        policy.register_storage_meter(reserve_storage_bytes, release_storage_bytes)
