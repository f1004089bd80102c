"""The packages domain's operations, one module per concept.

* ``search_index`` — embed source rows into ``kody_vectors``, skipping unchanged fingerprints.
* ``memories`` — the agent's long-term memories and their conversation suppressions.
* ``search`` — the builtin ``search``: capabilities and the caller's memories, ranked.
* ``values`` — plain per-user values in buckets.
* ``secrets`` — encrypted secrets in buckets (AES-GCM), grants and expiry.
"""
