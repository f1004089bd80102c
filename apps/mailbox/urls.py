from django.urls import path

from apps.mailbox import views

app_name = "mailbox"

urlpatterns = [
    path("inbound/email", views.inbound_email, name="inbound_email"),
]
