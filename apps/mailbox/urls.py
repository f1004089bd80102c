from django.urls import path

from apps.mailbox import views

app_name = "mailbox"

urlpatterns = [
    path("inbound/email", views.inbound_email, name="inbound_email"),
    path("inbound/email-events", views.delivery_webhook, name="delivery_webhook"),
    path("account/email", views.account_email, name="account_email"),
    path(
        "account/email/messages/<str:message_id>",
        views.account_email_message,
        name="account_email_message",
    ),
    path(
        "account/email/messages/<str:message_id>/delete",
        views.account_email_delete,
        name="account_email_delete",
    ),
    path(
        "account/email/messages/<str:message_id>/attachments/<str:attachment_id>",
        views.account_attachment,
        name="account_attachment",
    ),
]
