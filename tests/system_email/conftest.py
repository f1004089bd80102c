from tests.mailbox.conftest import mail_settings  # noqa: F401  (the same blob storage)
