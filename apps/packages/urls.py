from django.urls import path

from apps.packages import views

app_name = "packages"

urlpatterns = [
    path("account/memories", views.memory_list, name="memories"),
    path("account/memories/<str:memory_id>/delete", views.memory_delete, name="memory_delete"),
    path("account/secrets", views.secret_list, name="secrets"),
    path("account/secrets/delete", views.secret_delete, name="secret_delete"),
    path("account/secrets/approve", views.secret_approve, name="secret_approve"),
    path("account/secrets/grants", views.secret_grants, name="secret_grants"),
]
