import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

# Imported after Django is set up: the MCP app reads settings and the capability registry.
from kody.mcp.app import build_app, with_mcp  # noqa: E402

application = with_mcp(django_application, build_app())
