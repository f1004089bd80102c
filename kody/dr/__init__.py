"""Disaster-recovery export: a nightly canonical copy of the shared tables in the blob store.

``export`` writes it (the ``dr_export`` lane, resumable table by table), ``restore`` loads
one into a freshly migrated database (``manage.py dr_restore``), and the ``dr_export_watchdog``
lane fails loudly when the night's summary is missing. docs/runbooks/disaster-recovery.md is
the operator's procedure.
"""
