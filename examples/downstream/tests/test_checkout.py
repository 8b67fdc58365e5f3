"""The checkout against a real vault: the `vaultgraph` fixture (from the vaultgraph package's
pytest plugin) and vaultgraph's client, nothing else."""

from __future__ import annotations

import uuid

import pytest
from checkout import cards_of, receipt_line, save_card

from vaultgraph.client import Client, Forbidden, NotFound, Unauthorized

VISA = "4242424242424242"


def test_a_saved_card_is_a_child_token_of_its_customer(vaultgraph):
    customer = f"cust-{uuid.uuid4().hex[:8]}"
    card = save_card(vaultgraph.client, customer, VISA, 12, 2030)
    assert cards_of(vaultgraph.client, customer) == [card]
    assert receipt_line(vaultgraph.client, card) == "card ending 4242"
    stored = vaultgraph.client.get_token(card)
    assert stored["type"] == "card" and stored["tenant_id"] == vaultgraph.tenant_id


def test_a_deleted_card_is_gone(vaultgraph):
    card = save_card(vaultgraph.client, f"cust-{uuid.uuid4().hex[:8]}", VISA, 1, 2031)
    vaultgraph.client.delete_token(card)
    with pytest.raises(NotFound):
        vaultgraph.client.get_token(card)


def test_another_tenant_cannot_see_our_cards(vaultgraph):
    card = save_card(vaultgraph.client, f"cust-{uuid.uuid4().hex[:8]}", VISA, 2, 2032)
    other = vaultgraph.new_tenant("someone-else")
    with Client(vaultgraph.url, other.key) as theirs, pytest.raises(NotFound):
        theirs.get_token(card)


def test_a_wrong_key_is_refused(vaultgraph):
    with Client(vaultgraph.url, "vg_" + "0" * 43) as wrong, \
            pytest.raises((Unauthorized, Forbidden)):
        wrong.list_tokens()


async def _async_round_trip(vaultgraph) -> str:
    async with vaultgraph.async_client() as client:
        created = await client.create_token("token", {"note": "async"})
        return (await client.get_token(created["id"]))["data"]["note"]


def test_the_async_client_works_too(vaultgraph):
    import asyncio

    assert asyncio.run(_async_round_trip(vaultgraph)) == "async"
