"""OpenAPI bindings: fetch and validate a spec (``spec``), keep the chosen operations
(``bindings``), and write a package that calls them (``scaffold``)."""
