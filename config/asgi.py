import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

# Imported after Django is set up: the MCP app reads settings and the capability registry.
from django.conf import settings  # noqa: E402

from kody.admission import Admission  # noqa: E402
from kody.mcp.app import build_app, with_mcp  # noqa: E402

# As many requests inside as the pool has connections; the rest queue here (ADR 0048).
application = Admission(
    with_mcp(django_application, build_app()),
    places=settings.KODY_DB_POOL_SIZE,
    wait_seconds=settings.KODY_DB_POOL_TIMEOUT,
)
