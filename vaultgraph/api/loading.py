"""Request bodies loaded by their declared marshmallow schema, compiled once: the counterpart of
`endpoints.compile_dumper` for the way in.

`compile_loader(Schema)` returns a function that gives what `Schema().load(body)` gives. A body
whose every field is of the plain JSON type its field takes (a string for a `String`, a list of
strings for a `List(String())`, `true`/`false` for a `Boolean`, ...) is checked in one pass:
the fields in the schema's order, each field's own validators, then the schema's `@validates`
methods in marshmallow's order, on the same values marshmallow would pass them. Anything else —
an unknown or missing field, a null where none is allowed, a value of another type (including
those marshmallow would still convert, such as `"yes"` for a `Boolean`), a validator that
refuses — is loaded by the schema itself, so every error (its messages, the fields it names)
and every conversion is marshmallow's. marshmallow's per-field machinery (an error store,
getters, a `functools.partial` per validator) cost the benchmark's create body ~90 µs, this
pass under 4 µs. A schema with hooks or fields of kinds not known here is always loaded by
marshmallow. tests/unit/test_loading.py compares the two on generated bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, missing
from marshmallow.decorators import VALIDATES

from ..search.schemas import PageSize
from ..tokens.schemas import StringMap

Loader = Callable[[Any], dict]
# A value check: the loaded value, or _REFUSED when marshmallow must look at the body.
Check = Callable[[Any], Any]
_REFUSED = object()


def compile_loader(schema: type[Schema]) -> Loader:
    instance = schema()
    slow = instance.load
    plan = _plan(instance)
    if plan is None:
        return slow
    known = frozenset(key for key, *_ in plan)
    # marshmallow skips a name its schema declares but does not load (`only`, `exclude`).
    hooks = [(getattr(instance, name), [(field, instance.fields[field].data_key or field)
                                        for field in kwargs["field_names"]
                                        if field in instance.fields])
             for name, _, kwargs in instance._hooks[VALIDATES]]

    def load(body: Any) -> dict:
        if type(body) is not dict or not known.issuperset(body):
            return slow(body)
        out: dict[str, Any] = {}
        for key, attribute, required, allow_none, check in plan:
            if key not in body:
                if required:
                    return slow(body)
                continue
            value = body[key]
            if value is None:
                if not allow_none:
                    return slow(body)
            else:
                value = check(value)
                if value is _REFUSED:
                    return slow(body)
            out[attribute] = value
        for hook, names in hooks:
            for attribute, key in names:
                if attribute in out:
                    try:
                        if hook(out[attribute], data_key=key) is missing:
                            out.pop(attribute)
                    except ValidationError:
                        return slow(body)
        return out

    return load


def _plan(instance: Schema) -> list[tuple[str, str, bool, bool, Check]] | None:
    """Per field (in load order): its key, attribute, whether required, whether null is
    allowed, and its check; None when a part of the schema is not one this module knows."""
    if instance.opts.unknown != RAISE or instance.many or instance.partial:
        return None
    if any(hooks for kind, hooks in instance._hooks.items() if kind != VALIDATES):
        return None
    plan = []
    for name, field in instance.load_fields.items():
        attribute = field.attribute or name
        check = _check(field)
        if check is None or "." in attribute or field.load_default is not missing:
            return None
        plan.append((field.data_key or name, attribute, field.required, field.allow_none,
                     check))
    return plan


def _check(field: fields.Field) -> Check | None:
    """The field's check of a non-null value (its type, then its validators), or None."""
    if field.pre_load or field.post_load:
        return None
    convert = _convert(field)
    if convert is None:
        return None
    validators = tuple(field.validators)
    if not validators:
        return convert

    def check(value: Any) -> Any:
        value = convert(value)
        if value is _REFUSED:
            return value
        for validator in validators:
            try:  # marshmallow 4 takes what a validator returns as a pass
                validator(value)
            except ValidationError:
                return _REFUSED
        return value

    return check


def _convert(field: fields.Field) -> Check | None:
    kind = type(field)
    # A search body's page size is passed on as the JSON gave it, for api/paging.py to check.
    if kind is fields.Raw or kind is PageSize:
        return _as_is
    if kind is fields.String:
        return _string
    if kind is fields.Boolean:
        return _boolean
    if kind is fields.List:
        return _list(field.inner)
    # A StringMap loads what a Dict loads; only the names in its errors differ, and errors
    # come from marshmallow.
    if kind is fields.Dict or kind is StringMap:
        return _dict(field.key_field, field.value_field)
    return None


def _as_is(value: Any) -> Any:
    return value


def _string(value: Any) -> Any:
    return value if type(value) is str else _REFUSED


def _boolean(value: Any) -> Any:
    return value if value is True or value is False else _REFUSED


def _item(field: fields.Field | None) -> Check | None:
    """A check of a list's item or a mapping's key or value (null included), or None."""
    if field is None:
        return _as_is
    check = _check(field)
    if check is None:
        return None
    if field.allow_none:
        return lambda value: None if value is None else check(value)
    return lambda value: _REFUSED if value is None else check(value)


def _list(inner: fields.Field) -> Check | None:
    if type(inner) is fields.String and not inner.validators and not inner.allow_none:
        def strings(value: Any) -> Any:
            if type(value) is not list:
                return _REFUSED
            for item in value:
                if type(item) is not str:
                    return _REFUSED
            return list(value)

        return None if inner.pre_load or inner.post_load else strings
    check = _item(inner)
    if check is None:
        return None

    def items(value: Any) -> Any:
        if type(value) is not list:
            return _REFUSED
        out = []
        for item in value:
            item = check(item)
            if item is _REFUSED:
                return _REFUSED
            out.append(item)
        return out

    return items


def _dict(keys: fields.Field | None, values: fields.Field | None) -> Check | None:
    key_check, value_check = _item(keys), _item(values)
    if key_check is None or value_check is None:
        return None

    def mapping(value: Any) -> Any:
        if type(value) is not dict:
            return _REFUSED
        out = {}
        for key, item in value.items():
            key = key_check(key)
            item = value_check(item)
            if key is _REFUSED or item is _REFUSED:
                return _REFUSED
            out[key] = item
        return out

    return mapping
