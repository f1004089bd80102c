from tests.mailbox.conftest import mail_settings, owner  # noqa: F401  (the same cast and storage)
