"""Move calls left on shards beyond ``KODY_ACTOR_SHARDS`` (after the count was lowered) onto
the shards their users hash to now (``kody.actors.reshard``; runbook: changing the shard
count). Safe to interrupt and run again."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kody.actors import reshard, transport


class Command(BaseCommand):
    help = "Move the calls stranded on shards beyond KODY_ACTOR_SHARDS to their users' shards."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="List, move nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        count = settings.KODY_ACTOR_SHARDS
        found = reshard.stranded()
        if not found:
            self.stdout.write(
                f"No calls stranded beyond shard {count - 1} (KODY_ACTOR_SHARDS={count})."
            )
            return
        total = sum(each.depth + each.inflight for each in found)
        verb = "Would move" if options["dry_run"] else "Moving"
        self.stdout.write(
            f"{verb} {total} call(s) from {len(found)} shard(s) beyond KODY_ACTOR_SHARDS={count}."
        )
        leased = [each.queue for each in found if each.consumer]
        if leased:
            raise CommandError(
                f"{', '.join(leased)}: a worker still consumes (it runs with the old shard count);"
                " stop it, then run this again"
            )
        moved_all = 0
        for each in found:
            line = f"{each.queue}: {each.depth} queued, {each.inflight} in flight"
            if options["dry_run"]:
                self.stdout.write(f"{line}: would move")
                continue
            size = each.depth + each.inflight
            step = max(1, size // 10)

            def progress(
                moved: int, queue: str = each.queue, size: int = size, step: int = step
            ) -> None:
                if moved % step == 0 or moved == size:
                    self.stdout.write(f"  {queue}: {moved}/{size} moved")

            try:
                moved = reshard.move(each.shard, progress=progress)
            except reshard.ShardLeased as exc:
                raise CommandError(
                    f"{exc}: stop the worker on the old count, then run this again"
                ) from exc
            moved_all += moved.calls
            spread = ", ".join(
                f"{transport.queue_name(target)} {n}" for target, n in sorted(moved.to.items())
            )
            dropped = f", {moved.malformed} malformed dropped" if moved.malformed else ""
            self.stdout.write(f"{line}: moved {moved.calls} ({spread or 'none'}){dropped}")
        if not options["dry_run"]:
            self.stdout.write(f"Moved {moved_all} call(s).")
