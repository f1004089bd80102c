"""A person's allow/block/quarantine rules for inbound senders (shared config table)."""

from __future__ import annotations

from email.utils import parseaddr
from typing import Any

from django.db.models import Subquery

from apps.mailbox.models import EmailSenderRule, SenderRuleEffect, SenderRuleKind
from kody.errors import InvalidInput, NotFound


class RuleNotFound(NotFound):
    code = "sender_rule_not_found"
    message = "No such sender rule."


def sender_address(from_header: str) -> str:
    return parseaddr(from_header or "")[1].strip().lower()


def effect_for(user_id: str, from_header: str) -> str | None:
    """The most specific rule's effect for a sender: an address rule beats a domain rule."""
    address = sender_address(from_header)
    if not address:
        return None
    domain = address.rpartition("@")[2]
    rules = {
        (r.kind, r.value): r.effect
        for r in EmailSenderRule.objects.filter(user_id=user_id, value__in=[address, domain])
    }
    return rules.get((SenderRuleKind.ADDRESS, address)) or rules.get(
        (SenderRuleKind.DOMAIN, domain)
    )


def effect_annotations(user_id: str, from_header: str) -> dict[str, Subquery]:
    """``effect_for`` as two annotations for a query the caller makes anyway (inbound reads
    the inbox): the address rule's and the domain rule's effect; ``effect_of`` picks."""
    address = sender_address(from_header)
    domain = address.rpartition("@")[2] if address else ""

    def rule(kind: str, value: str) -> Subquery:
        rules = EmailSenderRule.objects.filter(user_id=user_id, kind=kind, value=value)
        return Subquery(rules.values("effect")[:1])

    return {
        "sender_address_rule": rule(SenderRuleKind.ADDRESS, address),
        "sender_domain_rule": rule(SenderRuleKind.DOMAIN, domain),
    }


def effect_of(annotated: Any) -> str | None:
    """The effect from ``effect_annotations``: an address rule beats a domain rule."""
    return annotated.sender_address_rule or annotated.sender_domain_rule or None


def rule_json(rule: EmailSenderRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "kind": rule.kind,
        "value": rule.value,
        "effect": rule.effect,
        "note": rule.note,
        "updatedAt": rule.updated_at.isoformat(),
    }


def list_rules(user_id: str) -> list[dict[str, Any]]:
    return [
        rule_json(r)
        for r in EmailSenderRule.objects.filter(user_id=user_id).order_by("kind", "value")
    ]


def set_rule(user_id: str, kind: str, value: str, effect: str, note: str = "") -> dict[str, Any]:
    value = value.strip().lower()
    if kind == SenderRuleKind.ADDRESS and "@" not in value:
        raise InvalidInput("An address rule needs a full address.", details={"value": value})
    if kind == SenderRuleKind.DOMAIN and ("@" in value or "." not in value):
        raise InvalidInput("A domain rule needs a domain name.", details={"value": value})
    if effect not in SenderRuleEffect.values:
        raise InvalidInput(details={"effect": effect})
    rule, _ = EmailSenderRule.objects.update_or_create(
        user_id=user_id, kind=kind, value=value, defaults={"effect": effect, "note": note}
    )
    return rule_json(rule)


def delete_rule(user_id: str, rule_id: str) -> None:
    deleted, _ = EmailSenderRule.objects.filter(user_id=user_id, id=rule_id).delete()
    if not deleted:
        raise RuleNotFound(details={"ruleId": rule_id})
