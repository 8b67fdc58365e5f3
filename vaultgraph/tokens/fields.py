"""Validators for token request fields.

Each function returns the accepted (possibly normalised) value or raises `ValueError` whose
message states the rule and never repeats the input, so it is safe to put in an error body.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, time, timedelta

from dateutil.parser import isoparser
from dateutil.parser import parse as parse_date

TOKEN_ID_MIN_LENGTH = 3
TOKEN_ID_MAX_LENGTH = 400
CONTAINER_MAX_LENGTH = 200
CONTAINER_MAX_SEGMENTS = 20

# Characters with a meaning in URLs, paths or expressions; an id must be usable as a path
# segment without escaping.
_FORBIDDEN_ID_CHARS = frozenset("#/\\+?[]|&=%<>{}^")
# Control, format (zero-width), surrogate, private-use, unassigned, and separators.
_FORBIDDEN_ID_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})
# The same two rules as searches instead of a look-up per character: the first made from the
# set above, for any id; the second for an ASCII id, in which only C0, DEL (Cc) and the space
# (Zs) are of those categories (tests/unit/test_token_fields.py checks both against the rules).
_FORBIDDEN_ID_CHAR = re.compile(f"[{re.escape(''.join(sorted(_FORBIDDEN_ID_CHARS)))}]")
_FORBIDDEN_ASCII_ID_CATEGORY = re.compile("[\x00-\x20\x7f]")

_CONTAINER_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
# Unicode's control characters (category Cc): C0, DEL and C1. One search instead of a category
# look-up per character (tests/unit/test_token_fields.py checks the range against unicodedata).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

_EXPIRES_AT_MESSAGE = (
    "must be a date-time as 'M/D/YYYY h:mm:ss AM|PM +hh:mm', 'M/D/YYYY' or ISO 8601"
)
_EXPIRES_AT_MAX_LENGTH = 64
_MAX_OFFSET = timedelta(hours=14)
# ISO 8601 through dateutil, with 'T' between date and time (any other character is refused).
_ISO = isoparser(sep="T")

# A filter on a metadata entry names it `metadata.<key>` (the list routes' query strings, the
# search language's fields); keys match case-insensitively.
METADATA_PREFIX = "metadata."


def metadata_filter_key(name: str) -> str | None:
    """The metadata key the filter name `metadata.<key>` stands for (lower-cased), or None when
    `name` is not a metadata filter."""
    if not name.startswith(METADATA_PREFIX):
        return None
    return name[len(METADATA_PREFIX):].lower()


def has_control_character(text: str) -> bool:
    """Whether `text` holds a character of Unicode category Cc."""
    return _CONTROL.search(text) is not None


def validate_token_id(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if not TOKEN_ID_MIN_LENGTH <= len(value) <= TOKEN_ID_MAX_LENGTH:
        raise ValueError(f"must be {TOKEN_ID_MIN_LENGTH} to {TOKEN_ID_MAX_LENGTH} characters long")
    if _FORBIDDEN_ID_CHAR.search(value):
        raise ValueError("must not contain any of # / \\ + ? [ ] | & = % < > { } ^")
    if (_FORBIDDEN_ASCII_ID_CATEGORY.search(value) if value.isascii()
            else any(unicodedata.category(ch) in _FORBIDDEN_ID_CATEGORIES for ch in value)):
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
    absent), its ShortDate 'M/D/YYYY' (midnight UTC), and ISO 8601 with a full date (UTC when
    no offset). dateutil parses; nothing it would guess is taken: free text ("tomorrow",
    "12"), partial or ambiguous dates and out-of-range parts are refused.
    """
    if not isinstance(value, str) or len(value) > _EXPIRES_AT_MAX_LENGTH:
        raise ValueError(_EXPIRES_AT_MESSAGE)
    text = value.strip()
    try:
        if not text.isascii():  # dateutil reads any Unicode digit; the formats are ASCII
            raise ValueError("not ASCII")
        parsed = _from_interface_format(text) if "/" in text else _from_iso_format(text)
        parsed = parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(_EXPIRES_AT_MESSAGE) from None
    if parsed <= _as_utc(now):
        raise ValueError("must be in the future")
    return parsed


def _from_interface_format(text: str) -> datetime:
    """'M/D/YYYY h:mm:ss AM|PM +hh:mm' (offset optional) or 'M/D/YYYY', month first.

    dateutil's parser is lenient: it swaps day and month when the month would be out of range,
    widens two-digit years, fills missing parts from a default, reads month names, 24-hour
    times and zone names. So the value is taken only when what dateutil understood, written
    back in the interface's format, is what was sent: anything guessed fails that round trip.
    """
    parsed = parse_date(text, dayfirst=False, yearfirst=False, fuzzy=False,
                        tzinfos=_offset_only)
    offset = parsed.utcoffset()
    if offset is not None and abs(offset) > _MAX_OFFSET:
        raise ValueError("offset out of range")
    if text.upper() not in _interface_spellings(parsed, with_time=" " in text):
        raise ValueError("not in the interface's format")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _offset_only(name: str | None, offset: int | None) -> int | None:
    # dateutil's hook for zones: a numeric offset is kept, a zone name alone is not resolved
    # (no tzlocal guess, no warning); the round trip then refuses the name.
    return offset


def _interface_spellings(moment: datetime, *, with_time: bool) -> set[str]:
    """Every way the interface's format writes `moment` (month, day and hour may be padded)."""
    dates = {f"{m}/{d}/{moment.year:04d}"
             for m in (f"{moment.month}", f"{moment.month:02d}")
             for d in (f"{moment.day}", f"{moment.day:02d}")}
    if not with_time:
        return set() if moment.tzinfo is not None or moment.time() != time() else dates
    if moment.microsecond:
        return set()
    hour12 = moment.hour % 12 or 12
    clock = f"{moment.minute:02d}:{moment.second:02d} {'AM' if moment.hour < 12 else 'PM'}"
    times = {f"{h}:{clock}" for h in (f"{hour12}", f"{hour12:02d}")}
    offset = moment.utcoffset()
    if offset is None:
        zones = {""}
    else:
        minutes = int(abs(offset).total_seconds()) // 60
        signs = "+-" if not minutes else "-" if offset < timedelta(0) else "+"
        zones = {f" {sign}{minutes // 60:02d}:{minutes % 60:02d}" for sign in signs}
    return {f"{d} {t}{z}" for d in dates for t in times for z in zones}


def _from_iso_format(text: str) -> datetime:
    """ISO 8601 by dateutil's isoparse, with a full date: 'YYYY', 'YYYY-MM' and 'YYYY-Www'
    (which isoparse completes with the first day) are partial, hence refused."""
    parsed = _ISO.isoparse(text)
    date_part = text.partition("T")[0]
    day = _ISO.parse_isodate(date_part)
    year, week, weekday = day.isocalendar()
    full = {day.isoformat(), f"{day:%Y%m%d}", f"{year:04d}-W{week:02d}-{weekday}",
            f"{year:04d}W{week:02d}{weekday}"}
    if date_part not in full:
        raise ValueError("partial date")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


# The years a time given as input may fall in, in UTC: those a datetime holds. A time at either
# end of the calendar with an offset may leave them in UTC (0001-01-01T00:00:00+05:00 is in year
# 0 there), and the database driver, which converts every time to UTC, fails on it.
INSTANT_YEARS = "from year 1 to 9999"


def utc_instant(moment: datetime) -> datetime:
    """An input's time in UTC (a naive one taken as UTC); ValueError when UTC cannot hold it
    (outside INSTANT_YEARS there), so a caller refuses it as input, not the driver later."""
    try:
        return _as_utc(moment)
    except OverflowError:
        raise ValueError(f"must be {INSTANT_YEARS} in UTC") from None


def format_datetime(moment: datetime) -> str:
    """ISO 8601 with an explicit offset; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


def parse_stored(text: str) -> datetime:
    """Neo4j's ISO 8601 text of a time (`toString`), a named zone's "[Area/City]" suffix
    dropped: the offset before it is exact."""
    return datetime.fromisoformat(text.partition("[")[0])


def format_stored_text(text: str) -> str:
    """`format_stored` of a time that came as Neo4j's text alone: parsed only when it is not
    the UTC form `format_stored` rewrites."""
    return format_stored(text, None) or format_datetime(parse_stored(text))


def format_stored(text: str | None, moment: datetime | None) -> str | None:
    """`format_datetime(moment)`, where `moment` was parsed from `text`, Neo4j's text of a
    time: a UTC one (`2026-12-02T00:34:34.296729123Z`, what a token's times are) rewritten
    as that would show it (`2026-12-02T00:34:34.296729+00:00`: microseconds, truncated, and
    none when they are 0), any other formatted from `moment`. A page shows fifty creation
    times, and `isoformat` of an aware datetime costs three times the rewriting."""
    if (text is not None and len(text) >= 20 and text[-1] == "Z" and text[10] == "T"
            and text[4] == text[7] == "-" and text[13] == text[16] == ":"):
        if len(text) == 20:
            return f"{text[:19]}+00:00"
        fraction = text[20:-1]
        if text[19] == "." and fraction.isdigit() and fraction.isascii():
            micro = fraction[:6].ljust(6, "0")
            return f"{text[:19]}+00:00" if micro == "000000" else f"{text[:19]}.{micro}+00:00"
    return None if moment is None else format_datetime(moment)
