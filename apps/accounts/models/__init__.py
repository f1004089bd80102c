from apps.accounts.models.users import Plan, User

__all__ = ["Plan", "User"]
