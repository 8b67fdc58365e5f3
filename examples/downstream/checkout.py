"""The code under test: a checkout that stores a customer's card in the vault and charges it by
token, never keeping the number itself."""

from __future__ import annotations

from vaultgraph.client import Client


def save_card(vault: Client, customer_id: str, number: str, month: int, year: int) -> str:
    """The customer's card, as a child token of the customer; returns the card's token id."""
    customer = vault.create_token("token", {"customer_id": customer_id}, id=customer_id,
                                  metadata={"customer_id": customer_id})
    card = vault.create_child(customer["id"], "card", {
        "number": number, "expiration_month": month, "expiration_year": year})
    return card["id"]


def cards_of(vault: Client, customer_id: str) -> list[str]:
    return [c["id"] for c in vault.children(customer_id)["data"]]


def receipt_line(vault: Client, card_token: str) -> str:
    """What a support screen shows: the masked number from the vault."""
    number = vault.get_token(card_token)["data"]["number"]
    return f"card ending {number[-4:]}"
