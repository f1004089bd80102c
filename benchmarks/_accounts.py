"""Real accounts for benchmarks: the kernel creates schemas only for live accounts."""

from __future__ import annotations

import secrets


def live_account_ids(count: int, plan: str | None = None) -> list[str]:
    """``count`` new users (one bulk insert, on ``plan`` if given); their stable ids."""
    from apps.accounts.models import User

    tags = [secrets.token_hex(8) for _ in range(count)]
    extra = {"plan": plan} if plan else {}
    users = [
        User(
            username=f"bench-{tag}",
            email=f"bench-{tag}@example.test",
            stable_user_id=tag * 4,
            **extra,
        )
        for tag in tags
    ]
    User.objects.bulk_create(users)
    return [user.stable_user_id for user in users]
