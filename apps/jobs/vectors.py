"""A job's vector: what the builtin ``search`` finds a job by, registered as a vector kind.

Packages keeps the vector kinds and the search; jobs is built on packages, so the job kind
registers itself from here (``JobsConfig.ready``) rather than packages importing jobs.
"""

from __future__ import annotations

from typing import Any

from apps.jobs.models import Job
from apps.jobs.schedules import describe
from apps.packages.services.search_index import Doc
from apps.packages.services.vector_kinds import Kind, doc_text, register
from kody.vectors.ids import vector_id


def job_doc(job: Job) -> Doc:
    target = (job.params_json or {}).get("target") or {}
    what = target.get("capability") or target.get("package") or ""
    text = doc_text(job.name, f"runs {what}" if what else "", describe(job.schedule_json or {}))
    return Doc(job.user_id, vector_id("job", job.id), text, {"kind": "job", "userId": job.user_id})


def job_hit(job: Job, score: float) -> dict[str, Any]:
    return {"type": "job", "id": job.id, "name": job.name, "score": round(score, 4)}


JOB = register(Kind("job", Job, job_doc, "jobs", job_hit))
