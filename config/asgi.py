import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

# Imported after Django is set up: the MCP app reads settings and the capability registry.
from apps.packages.connector_socket import with_connectors  # noqa: E402
from kody.mcp.app import build_app, with_mcp  # noqa: E402

# Remote connectors' WebSockets first; then /mcp and the lifespan; the rest is Django's.
application = with_connectors(with_mcp(django_application, build_app()))
