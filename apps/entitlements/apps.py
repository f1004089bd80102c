from django.apps import AppConfig


class EntitlementsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.entitlements"
    label = "entitlements"
    verbose_name = "Entitlements"

    def ready(self) -> None:
        from apps.accounts import policy
        from apps.entitlements import signals
        from apps.entitlements.services import count_limit, gifts, metering

        signals.connect()
        # The account write leases live in the UserMeter: the policy guards writes with them.
        policy.register_write_leases(metering)
        # Apps below this one (packages) hold plan count limits through the policy.
        policy.register_count_limits(count_limit)
        # The second-agent gift: a plan overlay granted on a person's MCP client use.
        policy.register_first_mcp_client_use(gifts.settle_second_agent_gift)
