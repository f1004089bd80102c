"""The packages domain's operations, one module per concept.

* ``search_index`` — embed source rows into ``kody_vectors``, skipping unchanged fingerprints.
* ``vector_kinds`` — which rows have a vector (memory, job, package) and what it says.
* ``index_debt`` — a write's vectors, inline or after the response, and the debt left pending.
* ``reindex`` — ``manage.py reindex``: rebuild every kind from its rows, resumable.
* ``memories`` — the agent's long-term memories and their conversation suppressions.
* ``search`` — the builtin ``search``: capabilities and the caller's memories, jobs and
  packages, ranked.
* ``values`` — plain per-user values in buckets.
* ``secrets`` — encrypted secrets in buckets (AES-GCM), grants and expiry.
"""
