from django.contrib import admin
from django.urls import include, path

from kody import views as kernel_views

urlpatterns = [
    path("", kernel_views.home, name="home"),
    path("healthz", kernel_views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("apps.accounts.urls")),
    path("", include("apps.accounts.oauth.urls")),
    path("", include("apps.entitlements.urls")),
    path("", include("apps.mailbox.urls")),
    path("", include("apps.packages.urls")),
    path("", include("apps.jobs.urls")),
    path("", include("apps.community.urls")),
    # /mcp is served in front of Django by config.asgi (the MCP SDK's Streamable HTTP app).
    path("api/v1/", include("kody.api.urls")),
]
