import random
import sys
import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest

from vaultgraph.tokens.fields import (
    format_datetime,
    format_stored,
    format_stored_text,
    has_control_character,
    metadata_filter_key,
    normalize_container,
    parse_expires_at,
    validate_token_id,
)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def expires(value, now=NOW):
    return parse_expires_at(value, now=now)


# --- token id ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "a" * 400, "order-123_x.y", "tok:émoji✓", "a~b@c!d"])
def test_token_id_accepts_valid_ids(value):
    assert validate_token_id(value) == value


@pytest.mark.parametrize("value", ["ab", "a", "a" * 401, "a" * 1000, ""])
def test_token_id_length_is_3_to_400(value):
    with pytest.raises(ValueError, match="3 to 400 characters"):
        validate_token_id(value)


@pytest.mark.parametrize("char", list("#/\\+?[]|&=%<>{}^"))
def test_token_id_rejects_reserved_characters(char):
    with pytest.raises(ValueError, match="must not contain any of"):
        validate_token_id(f"abc{char}def")


@pytest.mark.parametrize("char", [" ", "\t", "\n", "\x00", "\x7f", "\u200b", "\u00a0", "\u2028"])
def test_token_id_rejects_whitespace_and_control_characters(char):
    with pytest.raises(ValueError, match="whitespace or control"):
        validate_token_id(f"abc{char}def")


def test_an_ascii_id_is_refused_by_the_rules_every_id_is():
    """An ASCII id is checked by two searches, others character by character: every ASCII
    character, alone and beside a non-ASCII one, gets the answer the rules give."""
    reserved = set("#/\\+?[]|&=%<>{}^")
    categories = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}

    def outcome(value):
        try:
            return validate_token_id(value)
        except ValueError as exc:
            return str(exc)

    for code in range(128):
        ch = chr(code)
        if ch in reserved:
            expected = "must not contain any of # / \\ + ? [ ] | & = % < > { } ^"
        elif unicodedata.category(ch) in categories:
            expected = "must not contain whitespace or control characters"
        else:
            expected = None
        for value in (f"ab{ch}c", f"\u00e9b{ch}c"):
            assert outcome(value) == (value if expected is None else expected), (code, value)
    # Both rules broken: the reserved character is named first, either way.
    assert "must not contain any of" in outcome("a b#c")
    assert "must not contain any of" in outcome("\u00e9 b#c")


def test_token_id_must_be_a_string():
    with pytest.raises(ValueError, match="must be a string"):
        validate_token_id(12345)


def test_token_id_error_does_not_echo_input():
    value = "secret id with spaces"
    with pytest.raises(ValueError) as info:
        validate_token_id(value)
    assert value not in str(info.value)


# --- containers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "/"),
        ("/general/high/", "/general/high/"),
        ("/PCI/High/", "/pci/high/"),
        ("/a-b/c_d/0/", "/a-b/c_d/0/"),
    ],
)
def test_container_is_normalized_to_lower_case(path, expected):
    assert normalize_container(path) == expected


@pytest.mark.parametrize("path", ["general/high/", "/general/high", "general", ""])
def test_container_must_start_and_end_with_slash(path):
    with pytest.raises(ValueError, match="start and end with '/'"):
        normalize_container(path)


@pytest.mark.parametrize("path", ["//", "/a//b/", "/a b/", "/a.b/", "/é/", "/a/../"])
def test_container_segments_are_letters_digits_dash_underscore(path):
    with pytest.raises(ValueError, match="segments"):
        normalize_container(path)


def test_container_depth_is_bounded():
    normalize_container("/" + "a/" * 20)
    with pytest.raises(ValueError, match="at most 20 segments"):
        normalize_container("/" + "a/" * 21)


def test_container_length_is_bounded():
    with pytest.raises(ValueError, match="at most 200 characters"):
        normalize_container("/" + "a" * 200 + "/")


def test_container_must_be_a_string():
    with pytest.raises(ValueError, match="must be a string"):
        normalize_container(["/a/"])


# --- expires_at --------------------------------------------------------------------------------


def test_expires_at_datetime_with_offset():
    parsed = expires("11/21/2026 10:30:15 AM +02:00")
    assert parsed == datetime(2026, 11, 21, 8, 30, 15, tzinfo=UTC)
    assert parsed.utcoffset() == timedelta(0)


def test_expires_at_datetime_with_negative_offset_and_pm():
    assert expires("1/2/2027 1:05:00 PM -05:30") == datetime(2027, 1, 2, 18, 35, tzinfo=UTC)


def test_expires_at_datetime_without_offset_is_utc():
    assert expires("11/21/2026 10:00:00 PM") == datetime(2026, 11, 21, 22, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "hour"), [("11/21/2026 12:00:00 AM", 0), ("11/21/2026 12:00:00 PM", 12)]
)
def test_expires_at_twelve_am_is_midnight_and_twelve_pm_is_noon(value, hour):
    assert expires(value).hour == hour


def test_expires_at_short_date_is_midnight_utc():
    assert expires("11/21/2026") == datetime(2026, 11, 21, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-21T10:00:00+00:00", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        ("2026-11-21T10:00:00Z", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        ("2026-11-21T10:00:00+05:00", datetime(2026, 11, 21, 5, tzinfo=UTC)),
        ("2026-11-21T10:00:00", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        ("2026-11-21", datetime(2026, 11, 21, tzinfo=UTC)),
    ],
)
def test_expires_at_iso_8601_without_offset_is_utc(value, expected):
    assert expires(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "tomorrow",
        "12",
        "2026",
        "Nov 21 2026",
        "13/01/2026",
        "2/30/2026",
        "11/21/2026 13:00:00 PM",
        "11/21/2026 10:00:00",
        "11/21/2026 10:00 AM",
        "11/21/26",
        "11/21/2026 10:00:00 AM +25:00",
        "11/21/2026 10:00:00 AM +02:60",
        "",
        "  ",
        "2099-13-01",
        "4102444800",
        "x" * 100,
    ],
)
def test_expires_at_rejects_other_formats_without_echoing_input(value):
    with pytest.raises(ValueError, match="must be a date-time") as info:
        expires(value)
    if value.strip():
        assert value not in str(info.value)


def test_expires_at_must_be_a_string():
    with pytest.raises(ValueError, match="must be a date-time"):
        expires(1_800_000_000)


def test_expires_at_overflowing_offset_is_invalid_not_a_crash():
    with pytest.raises(ValueError, match="must be a date-time"):
        expires("12/31/9999 11:59:59 PM -05:00")


@pytest.mark.parametrize("value", ["5/1/2025", "6/1/2025 12:00:00 PM", "2025-06-01T12:00:00Z"])
def test_expires_at_must_be_in_the_future(value):
    with pytest.raises(ValueError, match="must be in the future"):
        expires(value)


def test_expires_at_compares_instants_across_offsets():
    # 12:30 at +01:00 is 11:30 UTC, before NOW (12:00 UTC).
    with pytest.raises(ValueError, match="must be in the future"):
        expires("6/1/2025 12:30:00 PM +01:00")
    assert expires("6/1/2025 12:30:00 PM -01:00") == datetime(2025, 6, 1, 13, 30, tzinfo=UTC)


# --- formatting --------------------------------------------------------------------------------


def test_format_datetime_is_iso_8601_with_offset():
    assert format_datetime(datetime(2026, 11, 21, 10, tzinfo=UTC)) == "2026-11-21T10:00:00+00:00"


def test_format_datetime_keeps_a_given_offset():
    moment = datetime(2026, 11, 21, 10, tzinfo=timezone(timedelta(hours=-5)))
    assert format_datetime(moment) == "2026-11-21T10:00:00-05:00"


def test_format_datetime_treats_naive_as_utc():
    assert format_datetime(datetime(2026, 11, 21, 10)) == "2026-11-21T10:00:00+00:00"


def _neo4j_utc_text(moment: datetime, digits: str) -> str:
    """A UTC time as Neo4j's toString writes it: Z, and as many fraction digits as it has."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{digits}" if digits else "") + "Z"


def test_a_stored_utc_time_is_shown_as_format_datetime_shows_what_it_parses_to():
    rng = random.Random(7)
    texts = ["2026-12-02T00:34:34Z", "2026-12-02T00:34:34.000000123Z", "2026-12-02T00:34:34.1Z",
             "2026-12-02T00:34:34.999999999Z", "2026-12-02T00:34:34.000001Z"]
    for _ in range(3000):
        moment = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(10**9))
        width = rng.choice((0, 1, 3, 6, 7, 9))
        digits = "".join(rng.choice("0123456789") for _ in range(width))
        texts.append(_neo4j_utc_text(moment, rng.choice((digits, "0" * width))))
    for text in texts:
        parsed = datetime.fromisoformat(text)
        assert format_stored(text, parsed) == format_datetime(parsed), text


@pytest.mark.parametrize("text", [
    "2026-12-02T00:34:34.123+01:00", "2026-12-02T00:34:34.5Z[UTC]", "2026-12-02 00:34:34Z",
    "2026-12-02T00:34:34,5Z", "20261202T003434Z", "2026-12-02T00:34Z"])
def test_any_other_stored_text_is_formatted_from_its_parsed_time(text):
    parsed = datetime.fromisoformat(text.partition("[")[0])
    assert format_stored(text, parsed) == format_datetime(parsed)
    assert format_stored(None, parsed) == format_datetime(parsed)
    assert format_stored(None, None) is None


def test_parsed_expiry_round_trips_through_format():
    assert format_datetime(expires("11/21/2026")) == "2026-11-21T00:00:00+00:00"


# --- expires_at: what dateutil alone would guess ----------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "21/11/2026",  # dateutil swaps day and month when the month is out of range
        "11/21/2026 22:00:00",  # a 24-hour clock, no AM/PM
        "11/21/2026 10:00:00AM",  # the interface puts a space before AM/PM
        "11/21",  # dateutil fills the year from its default
        "10:00:00 AM",  # ... and the date
        "11/21/2026 10:00:00.5 AM",  # fractions of a second are not in the format
        "11/21/2026 10:00:00 AM UTC",  # zone names: only a numeric offset
        "11/21/2026 10:00:00 AM XYZ",  # unknown zone: refused, not a dateutil warning
        "11/21/2026 10:00:00 AM +02:00 (CET)",
        "11/21/2026 10:00:00 AM +0200",
        "11/21/2026 10:00:00 AM +02",
        "11/21/2026 10:00:00 AM +14:01",
        "November 21, 2026",
        "21 Nov 2026",
        "Sat 11/21/2026",
        "11/21/2026 at 10:00:00 AM",
        "on 11/21/2026",
        "\uff11\uff11/\uff12\uff11/\uff12\uff10\uff12\uff16",  # full-width digits
        "2026",  # isoparse completes partial dates with the first month or day
        "2026-11",
        "2026-W47",
        "2026-W47T10:00:00",
        "2026-11-21 10:00:00",  # ISO 8601 separates date and time with 'T'
        "2026-11-21x10:00:00",
        "2026-11-21T10:00:00+24:00",
        "2026-11-21T10:00:00+05:60",
        "2026-02-29",
        "11/21/2026/10",
    ],
)
def test_expires_at_refuses_what_dateutil_would_guess(value):
    with pytest.raises(ValueError, match="must be a date-time") as info:
        expires(value)
    assert value not in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("07/09/2026 01:05:00 PM", datetime(2026, 7, 9, 13, 5, tzinfo=UTC)),
        ("7/9/2026 1:05:00 pm", datetime(2026, 7, 9, 13, 5, tzinfo=UTC)),
        ("11/21/2026 10:00:00 AM -00:00", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        ("11/21/2026 10:00:00 AM +14:00", datetime(2026, 11, 20, 20, tzinfo=UTC)),
        (" 11/21/2026 ", datetime(2026, 11, 21, tzinfo=UTC)),
        ("20261121", datetime(2026, 11, 21, tzinfo=UTC)),
        ("20261121T103000Z", datetime(2026, 11, 21, 10, 30, tzinfo=UTC)),
        ("2026-W47-6", datetime(2026, 11, 21, tzinfo=UTC)),
        ("2026-11-21T10", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        ("2026-11-21T10:00:00.250+01:00", datetime(2026, 11, 21, 9, 0, 0, 250000, tzinfo=UTC)),
    ],
)
def test_expires_at_accepts_every_spelling_of_the_formats(value, expected):
    assert expires(value) == expected


# --- exact messages and exact bounds (mutation testing: `make mutation`) --------------------
# The messages are part of the API (they are the error bodies' `errors` values), so they are
# compared whole; each bound is tried on both of its sides.

@pytest.mark.parametrize(("validator", "value", "message"), [
    (validate_token_id, 123, "must be a string"),
    (validate_token_id, "ab", "must be 3 to 400 characters long"),
    (validate_token_id, "ab/c", "must not contain any of # / \\ + ? [ ] | & = % < > { } ^"),
    (validate_token_id, "ab c", "must not contain whitespace or control characters"),
    (normalize_container, 1, "must be a string"),
    (normalize_container, "/" + "a" * 199 + "/", "must be at most 200 characters long"),
    (normalize_container, "a/", "must start and end with '/'"),
    (normalize_container, "/a", "must start and end with '/'"),
    (normalize_container, "/" + "a/" * 21, "must have at most 20 segments"),
    (normalize_container, "/a//b/",
     "segments must be non-empty and contain only letters, digits, - and _"),
    (normalize_container, "/a.b/",
     "segments must be non-empty and contain only letters, digits, - and _"),
])
def test_each_refusal_states_its_rule_exactly(validator, value, message):
    with pytest.raises(ValueError) as info:
        validator(value)
    assert str(info.value) == message


def test_a_container_of_exactly_200_characters_is_accepted():
    path = "/" + "A" * 198 + "/"
    assert len(path) == 200
    assert normalize_container(path) == path.lower()
    assert normalize_container("/") == "/"


def test_expires_at_of_exactly_64_characters_is_parsed_and_65_refused():
    text = "2099-01-02T03:04:05.000000000000000000000000000000000000000+00:00"
    text = text[:19] + "." + "0" * (64 - len(text[:19]) - 1 - 6) + "+00:00"
    assert len(text) == 64
    assert expires(text) == datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
    longer = text[:20] + "0" + text[20:]
    assert len(longer) == 65
    with pytest.raises(ValueError) as info:
        expires(longer)
    assert str(info.value) == (
        "must be a date-time as 'M/D/YYYY h:mm:ss AM|PM +hh:mm', 'M/D/YYYY' or ISO 8601")


# --- metadata filter names ---------------------------------------------------------------------

def test_a_metadata_filter_names_its_key_case_insensitively():
    assert metadata_filter_key("metadata.Tier") == "tier"
    assert metadata_filter_key("metadata.a.b") == "a.b"
    assert metadata_filter_key("metadata.") == ""
    assert metadata_filter_key("metadatatier") is None
    assert metadata_filter_key("Metadata.tier") is None
    assert metadata_filter_key("type") is None


# --- control characters ------------------------------------------------------------------------


def test_control_characters_are_unicode_category_cc():
    controls = {chr(c) for c in range(sys.maxunicode + 1)
                if unicodedata.category(chr(c)) == "Cc"}
    assert {ch for ch in map(chr, range(sys.maxunicode + 1))
            if has_control_character(f"key{ch}key")} == controls
    assert not has_control_character("customer_id \u00e9\u200b")


@pytest.mark.parametrize("text", [
    "2026-12-02T00:34:34.296729123Z", "2026-12-02T00:34:34Z",
    "2026-12-02T00:34:34.123456789+01:00", "2026-12-02T01:34:34.5+01:00[Europe/Paris]"])
def test_a_time_given_as_neo4js_text_alone_is_shown_as_the_time_it_names(text):
    # A link's time comes as text only (graph/link): what it shows is what parsing it and
    # formatting the time would show, whether or not the text is the UTC form.
    parsed = datetime.fromisoformat(text.partition("[")[0])
    assert format_stored_text(text) == format_datetime(parsed)
