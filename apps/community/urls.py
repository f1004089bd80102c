from django.urls import path

from apps.community import views

app_name = "community"

urlpatterns = [
    path("community", views.browse, name="browse"),
    path("community/icons/<str:listing_id>", views.icon, name="icon"),
    path("@<str:username>", views.profile, name="profile"),
    path("@<str:username>/<str:kody_id>", views.listing, name="listing"),
]
