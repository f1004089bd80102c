"""Community operations: listings, search, forks, social rows, moderation. Capabilities,
views and admin actions call these; nothing here trusts its caller's ids."""
