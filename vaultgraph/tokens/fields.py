"""Validators for token request fields.

Each function returns the accepted (possibly normalised) value or raises `ValueError` whose
message states the rule and never repeats the input, so it is safe to put in an error body.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, timedelta, timezone

TOKEN_ID_MIN_LENGTH = 3
TOKEN_ID_MAX_LENGTH = 400
CONTAINER_MAX_LENGTH = 200
CONTAINER_MAX_SEGMENTS = 20

# Characters with a meaning in URLs, paths or expressions; an id must be usable as a path
# segment without escaping.
_FORBIDDEN_ID_CHARS = frozenset("#/\\+?[]|&=%<>{}^")
# Control, format (zero-width), surrogate, private-use, unassigned, and separators.
_FORBIDDEN_ID_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})

_CONTAINER_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")

_EXPIRES_AT_MESSAGE = (
    "must be a date-time as 'M/D/YYYY h:mm:ss AM|PM +hh:mm', 'M/D/YYYY' or ISO 8601"
)
_EXPIRES_AT_MAX_LENGTH = 64
_US_DATE_TIME = re.compile(
    r"(?P<month>[0-9]{1,2})/(?P<day>[0-9]{1,2})/(?P<year>[0-9]{4})"
    r"(?: (?P<hour>[0-9]{1,2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2}) ?(?P<ampm>[AaPp][Mm])"
    r"(?: (?P<sign>[+-])(?P<off_h>[0-9]{2}):(?P<off_m>[0-9]{2}))?)?"
)


def validate_token_id(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if not TOKEN_ID_MIN_LENGTH <= len(value) <= TOKEN_ID_MAX_LENGTH:
        raise ValueError(f"must be {TOKEN_ID_MIN_LENGTH} to {TOKEN_ID_MAX_LENGTH} characters long")
    if any(ch in _FORBIDDEN_ID_CHARS for ch in value):
        raise ValueError("must not contain any of # / \\ + ? [ ] | & = % < > { } ^")
    if any(unicodedata.category(ch) in _FORBIDDEN_ID_CATEGORIES for ch in value):
        raise ValueError("must not contain whitespace or control characters")
    return value


def normalize_container(path: object) -> str:
    """Return the container path in its stored (lower-case) form."""
    if not isinstance(path, str):
        raise ValueError("must be a string")
    if len(path) > CONTAINER_MAX_LENGTH:
        raise ValueError(f"must be at most {CONTAINER_MAX_LENGTH} characters long")
    if not (path.startswith("/") and path.endswith("/")):
        raise ValueError("must start and end with '/'")
    if path == "/":
        return path
    segments = path[1:-1].split("/")
    if len(segments) > CONTAINER_MAX_SEGMENTS:
        raise ValueError(f"must have at most {CONTAINER_MAX_SEGMENTS} segments")
    if not all(_CONTAINER_SEGMENT.fullmatch(segment) for segment in segments):
        raise ValueError("segments must be non-empty and contain only letters, digits, - and _")
    return path.lower()


def parse_expires_at(value: object, *, now: datetime) -> datetime:
    """Parse an expiration time into an aware UTC datetime strictly after `now`.

    Accepted: the interface's 'M/D/YYYY h:mm:ss AM|PM +hh:mm' (offset optional, UTC when
    absent), its ShortDate 'M/D/YYYY' (midnight UTC), and ISO 8601 (UTC when no offset).
    Free-form dates ("tomorrow", "12") are refused rather than guessed.
    """
    if not isinstance(value, str) or len(value) > _EXPIRES_AT_MAX_LENGTH:
        raise ValueError(_EXPIRES_AT_MESSAGE)
    text = value.strip()
    try:
        match = _US_DATE_TIME.fullmatch(text)
        parsed = _from_us_format(match) if match else _from_iso_format(text)
        parsed = parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(_EXPIRES_AT_MESSAGE) from None
    if parsed <= _as_utc(now):
        raise ValueError("must be in the future")
    return parsed


def _from_us_format(match: re.Match[str]) -> datetime:
    fields = match.groupdict()
    hour = minute = second = 0
    if fields["hour"] is not None:
        hour12 = int(fields["hour"])
        if not 1 <= hour12 <= 12:
            raise ValueError("hour out of range")
        hour = hour12 % 12 + (12 if fields["ampm"].upper() == "PM" else 0)
        minute, second = int(fields["minute"]), int(fields["second"])
    tz = UTC
    if fields["sign"] is not None:
        offset = timedelta(hours=int(fields["off_h"]), minutes=int(fields["off_m"]))
        if int(fields["off_m"]) >= 60 or offset > timedelta(hours=14):
            raise ValueError("offset out of range")
        tz = timezone(-offset if fields["sign"] == "-" else offset)
    year, month, day = int(fields["year"]), int(fields["month"]), int(fields["day"])
    return datetime(year, month, day, hour, minute, second, tzinfo=tz)


def _from_iso_format(text: str) -> datetime:
    # fromisoformat only accepts ISO 8601 shapes (unlike dateutil's fuzzy parser), and always
    # requires a full calendar or week date.
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_datetime(moment: datetime) -> str:
    """ISO 8601 with an explicit offset; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()
