"""Cursor pagination: page sizes, cursors, and the errors that name the parameter."""

from __future__ import annotations

import pytest
from multidict import MultiDict

from vaultgraph import errors
from vaultgraph.api.paging import page_body, page_from_query, page_size
from vaultgraph.pagination import decode_cursor, encode_cursor
from vaultgraph.settings import Settings

SETTINGS = Settings()


def test_default_size_when_absent():
    assert page_from_query(MultiDict(), SETTINGS).size == SETTINGS.page_size_default


@pytest.mark.parametrize("value", ["0", "101", "-1", "abc", "²", "1.5", "", 0, 101, -1, True,
                                   1.5, "\uff17"])  # a full-width 7
def test_one_check_of_a_page_size_for_query_strings_and_bodies(value):
    with pytest.raises(errors.Invalid) as err:
        page_size(value, SETTINGS)
    assert err.value.errors == {"size": ["must be a whole number from 1 to 100"]}


def test_a_page_size_is_a_whole_number_or_a_query_strings_digits():
    assert [page_size(v, SETTINGS) for v in (1, 100, None)] == [
        1, 100, SETTINGS.page_size_default]
    assert [page_from_query(MultiDict(size=v), SETTINGS).size for v in ("1", "100")] == [1, 100]


@pytest.mark.parametrize("value", ["1", "100", "ten", [1], {"n": 1}, 1.0])
def test_a_body_page_size_given_as_text_or_another_type_gets_the_one_message(value):
    # A search body's `size` reaches this check as the JSON gave it (search/schemas.py).
    with pytest.raises(errors.Invalid) as err:
        page_size(value, SETTINGS)
    assert err.value.errors == {"size": ["must be a whole number from 1 to 100"]}


@pytest.mark.parametrize("raw", ["0", "101", "-1", "abc", "²", "1.5", ""])
def test_bad_sizes_name_the_size_parameter(raw):
    with pytest.raises(errors.Invalid) as err:
        page_from_query(MultiDict(size=raw), SETTINGS)
    assert list(err.value.errors) == ["size"]


def test_cursor_round_trips():
    for value in ("tok_1", ["2026-01-01T00:00:00Z", "id"], {"a": 1}):
        assert decode_cursor(encode_cursor(value)) == value


@pytest.mark.parametrize("raw", ["%%%", "bm90IGpzb24", "é"])
def test_malformed_cursor_names_the_start_parameter(raw):
    with pytest.raises(errors.Invalid) as err:
        page_from_query(MultiDict(start=raw), SETTINGS)
    assert list(err.value.errors) == ["start"]


def test_body_has_pagination_and_data():
    body = page_body([{"id": "a"}], page_from_query(MultiDict(size="1"), SETTINGS), "a")
    assert body["pagination"]["page_size"] == 1
    assert decode_cursor(body["pagination"]["next"]) == "a"
    assert page_body([], page_from_query(MultiDict(), SETTINGS), None)["pagination"]["next"] is None


@pytest.mark.parametrize("foreign", [123, None, [1, 2], {"a": 1}])
def test_a_cursor_of_another_shape_names_the_start_parameter(foreign):
    with pytest.raises(errors.Invalid) as err:
        page_from_query(MultiDict(start=encode_cursor(foreign)), SETTINGS, cursor_type=str)
    assert list(err.value.errors) == ["start"]
