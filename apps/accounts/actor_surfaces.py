"""The actors' half of the surfaces list: how deletion and export reach each actor's per-user
state. Apps register here from their ``actor`` packages; ``apps.accounts.surfaces`` names the
same things, so either import works."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ActorSurface:
    """How deletion and export reach one actor's per-user state.

    Each app registers its actors from its ``actor`` package with ``register_actor`` (so the
    hooks sit next to the code they describe). The hooks are method names on the actor, each
    marked ``@kody.actors.deletion_safe`` (they must run while the account is being deleted):

    * ``export_pages(cursor: str | None = None, limit: int = 500) -> dict`` — one page; the
      dict carries ``"next_cursor"`` (opaque string, or ``None`` on the last page) beside the
      page's content. Export writes each page as one JSON line of section ``export_section``.
    * ``purge() -> dict`` — deletes every row of the actor's tables (never blobs), returns
      ``{"deleted": {table: count, ...}, ...}``; idempotent.
    * ``blob_references(cursor: str | None = None, limit: int = 500) -> dict`` — the blobs
      the actor's rows point at: ``{"references": [{"bucket": name, "key": key}, ...],
      "next_cursor": ...}``. Deletion reads every page *before* ``purge`` and deletes those
      blobs first, then sweeps the owner's blob prefixes.

    * ``blob_prefixes() -> dict`` — optional: ``{"prefixes": [{"bucket", "prefix"}, ...]}``,
      blob prefixes keyed by something other than the user (a repo session's id) that only
      the actor can list. Deletion purges each before ``purge``; if the list cannot be read
      the deletion stops and the account is kept (a rerun continues).

    * ``import_page(page: dict) -> dict`` — optional: restore one page exactly as
      ``export_pages`` returned it (``manage.py import_account``), idempotently (a rerun of the
      same page changes nothing); returns ``{"imported": {table: count}}``. Pages arrive in
      export order, after the public rows and the blobs.

    ``export_pages`` may be ``None`` only with a ``note`` saying why nothing is exported;
    ``blob_references`` is ``None`` for an actor that stores no blob keys. An exported actor
    without ``import_page`` says in ``import_note`` why its state stays behind on import.

    An actor that declares ``tables`` gets them the first time it runs for a user
    (``kody.userschema.tablesets``). Until then it has no state: export shows its section
    with an empty page and deletion skips its hooks (``has_actor_state``), so neither
    creates tables only to read nothing.
    """

    actor: str  # the actor's wire name (``Actor.name``)
    purge: str
    export_pages: str | None
    export_section: str | None
    blob_references: str | None = None
    note: str = ""
    import_page: str | None = None
    import_note: str = ""
    blob_prefixes: str | None = None


_ACTOR_SURFACES: dict[str, ActorSurface] = {}

# Product actor tables that every user schema gets at creation, by app, with the reason. Any
# other product actor table must be in some actor's ``tables`` (created on first use); the
# guardrail test holds both lists to the models.
EAGER_ACTOR_APPS = {
    "entitlements": "UserMeter: every user is metered from their first call",
}


def register_actor(surface: ActorSurface) -> ActorSurface:
    """Declare an actor's deletion/export hooks (call it from the app's ``actor`` package)."""
    if (surface.export_pages is None) != (surface.export_section is None):
        raise ValueError(f"{surface.actor}: export_pages and export_section go together")
    if surface.export_pages is None and not surface.note:
        raise ValueError(f"{surface.actor}: say in note why the actor is not exported")
    if surface.import_page is not None and surface.export_pages is None:
        raise ValueError(f"{surface.actor}: import_page restores what export_pages wrote")
    if surface.export_pages is not None and surface.import_page is None and not surface.import_note:
        raise ValueError(f"{surface.actor}: say in import_note why its export is not imported")
    existing = _ACTOR_SURFACES.get(surface.actor)
    if existing is not None and existing != surface:
        raise ValueError(f"{surface.actor} is registered twice with different hooks")
    _ACTOR_SURFACES[surface.actor] = surface
    return surface


def actor_surfaces() -> dict[str, ActorSurface]:
    """Every registered actor surface, after every app's actors have been imported."""
    from kody.discovery import autodiscover

    autodiscover()
    return dict(_ACTOR_SURFACES)
