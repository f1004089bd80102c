from django.urls import path

from apps.jobs import views

app_name = "jobs"

urlpatterns = [
    path("account/jobs", views.jobs_page, name="jobs"),
    path("account/jobs/<str:job_id>", views.job_page, name="job"),
    path("account/jobs/<str:job_id>/pause", views.job_pause, name="job_pause"),
    path("account/jobs/<str:job_id>/resume", views.job_resume, name="job_resume"),
    path("account/jobs/<str:job_id>/run", views.job_run, name="job_run"),
    path("account/activity", views.activity_page, name="activity"),
    path("account/activity/<str:run_id>", views.run_page, name="run"),
]
