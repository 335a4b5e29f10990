"""What happens when a rule fires. Imports only boto3 and the standard library (the Lambda assets ship it)."""

from __future__ import annotations

from smx_debug.actions.tags import ActionSpec, DecodedTags, decode_tags, encode_tags

__all__ = ["ActionSpec", "DecodedTags", "decode_tags", "encode_tags"]
