"""OAuth client connections: Kody as the OAuth *client* of other services.

Rooms:

* ``oauth_apps`` — the user's own (bring-your-own) OAuth apps; client secret in a user secret.
* ``platform_apps`` — operator apps (``platform_oauth_apps``); secret sealed inline; logos.
* ``connections`` — ``user_integrations`` rows: validation (``plan``), writes, projections.
* ``client`` — one ``OAuthApp`` shape for both kinds and the Authlib session (SSRF-guarded).
* ``flow`` — authorization-code start/callback with a user-bound single-use state, refresh
  under a row lock.
* ``tokens`` — where tokens live (user secrets, ``allowed_hosts`` = the integration's required
  hosts) and the server-side reads other features reuse: ``store_tokens``,
  ``read_access_token``; ``flow.live_access_token`` refreshes an expired one first.
* ``registry`` — the curated provider registry and RFC 8414 discovery.

The invariant every room keeps: no token or client secret value is ever returned, rendered,
logged or exported. Values are read only inside ``client``/``flow`` to make a token request,
and by ``tokens.read_access_token`` for a request Kody itself makes with the user's token.
"""

from apps.packages.services.integrations.flow import live_access_token
from apps.packages.services.integrations.tokens import read_access_token, store_tokens

__all__ = ["live_access_token", "read_access_token", "store_tokens"]
