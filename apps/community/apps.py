from django.apps import AppConfig


class CommunityConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.community"
    label = "community"
    verbose_name = "Community"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from apps.community.services.forks import forget_package
        from apps.packages.models import SavedPackage

        def package_deleted(sender: object, instance: SavedPackage, **kwargs: object) -> None:
            forget_package(instance.user_id, instance.id)

        post_delete.connect(package_deleted, sender=SavedPackage, weak=False)
