"""Social sign-in with GitHub and Google at ``/auth/<provider>``: Kody as an OAuth 2 client
(Authlib) of the provider, for signing in and linking ``oauth_connections`` — never for acting
on the person's behalf at the provider; its tokens are used once for the profile and dropped.

``providers``: which providers are configured and how each one's profile is read.
``flow``: the authorization-code round trip (``state`` + PKCE kept in the session).
``views``: the two routes. The decisions (sign in, sign up, link, unlink) live in
``apps.accounts.services.social``.
"""
