from django.urls import path

from apps.entitlements import views

app_name = "entitlements"

urlpatterns = [
    path("account/billing", views.billing_page, name="billing"),
    path("account/billing/checkout", views.checkout, name="checkout"),
    path("account/billing/checkout.json", views.checkout_json, name="checkout_json"),
    path("account/billing/success", views.checkout_success, name="checkout_success"),
    path("account/billing/portal", views.portal, name="portal"),
    path("account/usage.json", views.usage_json, name="usage_json"),
    path("webhooks/stripe", views.stripe_webhook, name="stripe_webhook"),
]
