"""The shared pydantic base and the translation of validation errors into ConfigError."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from pydantic_core import PydanticCustomError

from smx_debug.errors import ConfigError, UnknownNameError

PositiveInt = Annotated[StrictInt, Field(gt=0)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]

_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[^\s]*)?$")


def _check_s3(value: str) -> str:
    if not _S3_URI.match(value):
        raise PydanticCustomError(
            "smx_s3_uri", "not an S3 URI: expected s3://<bucket>/<prefix> with a valid bucket name"
        )
    return value


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise PydanticCustomError("smx_regex", "invalid regular expression ({reason})", {"reason": str(exc)}) from None
    return value


S3Uri = Annotated[StrictStr, AfterValidator(_check_s3)]
Regex = Annotated[StrictStr, AfterValidator(_check_regex)]


def unknown_name_error(subpath: str, exc: UnknownNameError) -> PydanticCustomError:
    """Carry an UnknownNameError (and its suggestion) through pydantic."""
    return PydanticCustomError(
        "smx_unknown_name",
        str(exc),
        {"subpath": subpath, "bad_value": repr(exc.name), "name": exc.name, "suggestion": exc.suggestion or ""},
    )


def _path(loc: tuple[int | str, ...], subpath: str = "") -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(("function-", "union[", "literal[", "tagged-union")):
            continue
        else:
            out += f".{part}" if out else part
    if subpath:
        out = f"{out}.{subpath}" if out else subpath
    return out or "(plan)"


def to_config_error(exc: ValidationError, *, source: str = "") -> ConfigError | UnknownNameError:
    """Turn a pydantic ValidationError into one message naming every bad field and its value."""
    lines: list[str] = []
    first_field = ""
    first_value: object = None
    unknown: UnknownNameError | None = None
    for err in exc.errors(include_url=False):
        ctx: dict[str, Any] = err.get("ctx") or {}
        field = _path(tuple(err["loc"]), str(ctx.get("subpath", "")))
        value = err.get("input")
        shown = ctx.get("bad_value", repr(value))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        if err["type"] == "missing":
            lines.append(f"{field}: required field is missing")
        else:
            lines.append(f"{field}: {msg} (got {shown})" if len(str(shown)) < 200 else f"{field}: {msg}")
        if not first_field:
            first_field, first_value = field, value
            if err["type"] == "smx_unknown_name":
                unknown = UnknownNameError(
                    f"{field}: {msg}", name=str(ctx.get("name", "")), suggestion=ctx.get("suggestion") or None
                )
    prefix = f"{source}: " if source else ""
    if unknown is not None and len(lines) == 1:
        return UnknownNameError(prefix + str(unknown), name=unknown.name, suggestion=unknown.suggestion)
    if len(lines) == 1:
        return ConfigError(prefix + lines[0], field=first_field, value=first_value)
    body = "\n  ".join(lines[:20])
    return ConfigError(f"{prefix}{len(lines)} problems:\n  {body}", field=first_field, value=first_value)


class FrozenModel(BaseModel):
    """Frozen, no extra fields; building one directly raises ConfigError naming the field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise to_config_error(exc) from None

    # Marked as pydantic's own __init__, so validating nested models (and model_validate) does not
    # call it: the error is converted once, at the outermost model, with the whole field path.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]
