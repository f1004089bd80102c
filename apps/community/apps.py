from django.apps import AppConfig


class CommunityConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.community"
    label = "community"
    verbose_name = "Community"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from apps.community.models import CommunityFork, CommunityListing
        from apps.community.services.forks import forget_package
        from apps.community.services.listings import hard_delete
        from apps.packages.models import SavedPackage
        from apps.packages.services import secrets

        def unadopted_fork(user_id: str, package_id: str) -> bool:
            return CommunityFork.objects.filter(
                forker_user_id=user_id, forked_package_id=package_id, adopted_at__isnull=True
            ).exists()

        # An unadopted fork uses the forker's secrets only with an explicit grant.
        secrets.register_unadopted_fork_check(unadopted_fork)

        def package_deleted(sender: object, instance: SavedPackage, **kwargs: object) -> None:
            # The fork row goes with the forked package; a listing cannot outlive the package
            # (and repo) it pins.
            forget_package(instance.user_id, instance.id)
            for listing_id in CommunityListing.objects.filter(
                owner_user_id=instance.user_id, package_id=instance.id
            ).values_list("id", flat=True):
                hard_delete(listing_id)

        post_delete.connect(package_deleted, sender=SavedPackage, weak=False)
