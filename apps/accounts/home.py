"""What the account home shows: for each thing a person keeps in Kody, how many and the
latest few, each linking to its own page; and, behind the ``account_home_next_step`` flag, a
card with the person's next onboarding step.

Part of the account lifecycle layer (tests/kernel/test_layering.py): like export, it reads
every app's data, through each app's services."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse
from django.utils import timezone

from apps.accounts import campaigns
from apps.accounts.models import User
from apps.accounts.models.campaigns import CampaignState
from apps.accounts.oauth import grants
from apps.accounts.services import flags
from apps.jobs import services as jobs
from apps.mailbox.services import reads as mail
from apps.packages.models import SavedPackage
from apps.packages.services import memories, secrets
from kody.errors import KodyError

LATEST = 3
# Off until operators turn it on (a data migration seeds the row disabled, so exposures and the
# admin readout count from the first page view): does an in-app nudge move people along the
# onboarding steps the tips mail describes?
NEXT_STEP_FLAG = "account_home_next_step"


@dataclass
class Section:
    key: str
    title: str
    url: str
    count: int | None  # None: could not be read just now
    latest: list[str] = field(default_factory=list)


def sections(user: User) -> list[Section]:
    uid = user.stable_user_id
    return [
        _messages(user),
        _memories(uid),
        _secrets(uid),
        _jobs(uid),
        _packages(uid),
        _agents(user),
    ]


def _messages(user: User) -> Section:
    url = reverse("mailbox:account_email")
    try:
        count = mail.count(user)["messages"]
        page = mail.list_messages(user, limit=LATEST)["messages"] if count else []
    except KodyError:
        # The mailbox lives behind the user's actor; the home page still renders without it.
        return Section("messages", "Messages", url, None)
    return Section("messages", "Messages", url, count, [_subject(m) for m in page])


def _subject(message: dict[str, Any]) -> str:
    return message.get("subject") or "(no subject)"


def _memories(uid: str) -> Section:
    latest = [m.subject or m.summary for m in memories.recent(uid, limit=LATEST)]
    url = reverse("packages:memories")
    return Section("memories", "Memories", url, memories.count_active(uid), latest)


def _secrets(uid: str) -> Section:
    rows = secrets.list_secrets(uid)
    latest = [row["name"] for row in rows[:LATEST]]
    return Section("secrets", "Secrets", reverse("packages:secrets"), len(rows), latest)


def _jobs(uid: str) -> Section:
    latest = [job["name"] for job in jobs.list_jobs(uid, limit=LATEST)["jobs"]]
    return Section("jobs", "Jobs", reverse("jobs:jobs"), jobs.count_jobs(uid), latest)


def _packages(uid: str) -> Section:
    saved = SavedPackage.objects.filter(user_id=uid)
    latest = list(saved.order_by("-updated_at").values_list("name", flat=True)[:LATEST])
    # Saved packages are managed by agents (packageList); the connections page is where a
    # person sees what their agents can reach.
    url = reverse("accounts:connections")
    return Section("packages", "Packages", url, saved.count(), latest)


def _agents(user: User) -> Section:
    connected = grants.list_grants(user)
    latest = [g.client_name or g.client_id for g in connected[:LATEST]]
    url = reverse("accounts:connections")
    return Section("agents", "Connected agents", url, len(connected), latest)


@dataclass(frozen=True)
class NextStep:
    key: str
    title: str
    text: str
    url: str
    link: str


def next_step(user: User) -> NextStep | None:
    """The onboarding step the person is on, in the campaign lane's own terms, so the card and
    the tips mail never disagree; None once there is no step left (or the flag is off for
    them). The flag is read first: people outside the rollout cost no extra query."""
    if not flags.is_enabled(NEXT_STEP_FLAG, user, source="code"):
        return None
    state = campaigns.state_of(user, timezone.now(), {}, ever_activated=False)
    connections = reverse("accounts:connections")
    steps = {
        CampaignState.VERIFIED_NO_MCP: NextStep(
            "connect",
            "Connect your first agent",
            "Add Kody as an MCP server in the agent you use; it takes one step.",
            connections,
            "Connect an agent",
        ),
        CampaignState.CONNECTED_NO_PACKAGE: NextStep(
            "package",
            "Save your first package",
            "Ask your agent to save something it wrote as a package: every agent of yours "
            "can then use it.",
            connections,
            "See what your agents can reach",
        ),
        CampaignState.PACKAGED_SINGLE_CLIENT: NextStep(
            "second-agent",
            "Use your packages from a second agent",
            "Your packages work from any agent you connect. Connect another one.",
            connections,
            "Connect another agent",
        ),
    }
    return steps.get(state)
