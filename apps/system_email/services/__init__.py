"""Operator system mail: inbound for the reserved locals (``inbound``) and retention."""
