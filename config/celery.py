import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("kody")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Workers started with -Q actors.shard-N drain those queues in batches (kody/actors/worker.py).
app.steps["worker"].add("kody.actors.worker:ShardDrain")
