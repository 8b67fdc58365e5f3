"""Expression limits and errors, shared by the filters, the bounds and the environment."""

from __future__ import annotations

DEFAULT_FINGERPRINT_EXPRESSION = "{{ data | stringify }}"

MAX_EXPRESSION_LENGTH = 4_096
# Must stay above the largest token data the API accepts (settings.max_data_bytes, 64 KiB by
# default): the default fingerprint renders the whole of `data` as JSON. UTF-8 bytes.
MAX_OUTPUT_BYTES = 1024 * 1024
MAX_MASK_DEPTH = 32
# Bounds the padding filters, which would otherwise allocate before the output limit applies.
MAX_PAD_LENGTH = 4_096
# Every value a filter takes or makes, and the time of one render (a whole mask is one): chained
# filters (`| to_base16 | to_base16 …`), ranges (`(1..100000000) | join`) and replaces multiply
# sizes, and loops of heavy filters burn CPU, long before the output limit is ever checked. A
# value's size counts characters and items (nested ones each time they are reached, as flattening
# reaches them); integers are bounded by bits.
MAX_VALUE_SIZE = MAX_OUTPUT_BYTES
MAX_INT_BITS = 65_536
MAX_RENDER_SECONDS = 0.25

_DISABLED_TAGS = ("include", "render")


class ExpressionError(ValueError):
    """An expression failed to compile or render. The message is always a generic reason."""


class ExpressionLimitError(ExpressionError):
    """A render exceeded a size or time bound."""

    def __init__(self) -> None:
        super().__init__("expression exceeded a resource limit")

