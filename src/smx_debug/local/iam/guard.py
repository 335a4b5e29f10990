"""The local server's guard: a request signed with a caller's key (a deployed function's, a principal's) that the
client plugin did not stamp is refused (the plugin was not loaded), so no call is waved through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import moto.moto_server.werkzeug_app as werkzeug_app

from smx_debug.local.iam.ledger import Record, caller_of, ledger
from smx_debug.local.iam.plugin import PLUGIN_ENV, STAMP_HEADER, access_key
from smx_debug.local.patching import patch_once


def install() -> None:
    """Make the local server refuse a request signed with a deployed function's key that the client plugin
    did not authorize (the plugin was not loaded): nothing a function calls is waved through. Idempotent."""
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
            key = access_key({"Authorization": environ.get("HTTP_AUTHORIZATION", "")})
            caller = caller_of(key or "")
            if caller is not None and not environ.get("HTTP_" + STAMP_HEADER.upper().replace("-", "_")):
                message = (f"request by {caller.who} was not authorized by the local IAM (its client lacks the "
                           f"{PLUGIN_ENV} plugin)")
                book = ledger(caller.aws)
                book.record(Record(caller.handler, environ.get("PATH_INFO", ""), "", "", False, None, "", message,
                                   book.new_call(), caller.user))
                start_response("403 Forbidden", [("Content-Type", "text/plain")])
                return [message.encode()]
            return original(self, environ, start_response)

        return call

    patch_once(werkzeug_app.DomainDispatcherApplication, "__call__", wrap)

