"""The embedded local AWS: a moto server on a free loopback port, in this process.

Only moto's own behaviour lives here. What moto lacks (StopTrainingJob, rule evaluation statuses,
EventBridge-to-Lambda delivery, ...) is added one behaviour per module beside it (see :mod:`smx_debug.local`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

DEFAULT_REGION = "us-west-2"
LOCAL_ACCOUNT_ID = "123456789012"  # moto's default account
_FAKE_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
# Connections each client keeps to the server: the report readers fetch with up to 16 threads
# (smx_debug.data.sources.DEFAULT_WORKERS) and the SDK and handlers add a few; botocore's default is 10.
MAX_POOL_CONNECTIONS = 32
_T = TypeVar("_T")


@contextlib.contextmanager
def scoped_environ(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``values`` within the block, then each of those keys as it was."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _LocalSession(boto3.Session):
    """A boto3 session whose every client and resource goes to the local server.

    Also those created with an explicit ``endpoint_url``: the SageMaker SDK asks for the regional STS endpoint
    by URL (``Session.account_id``, ``default_bucket``), which would otherwise reach the real AWS.
    """

    def __init__(self, endpoint_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._smx_endpoint_url = endpoint_url

    def _local(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        ours = Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=MAX_POOL_CONNECTIONS)
        theirs = kwargs.get("config")
        return {**kwargs, "endpoint_url": self._smx_endpoint_url,
                "config": ours.merge(theirs) if theirs is not None else ours}

    def client(self, *args: Any, **kwargs: Any) -> Any:
        return super().client(*args, **self._local(kwargs))

    def resource(self, *args: Any, **kwargs: Any) -> Any:
        return super().resource(*args, **self._local(kwargs))


class LocalAws:
    """A moto server bound to 127.0.0.1 and boto3 clients that talk to it.

    moto keeps its accounts per process: two LocalAws started in one process (a notebook cell run twice, a test
    beside an example) are two endpoints over the same resources. :meth:`reset` empties them. What the local AWS's
    behaviours record (the IAM's decisions, in-process deliveries, warm handlers) is each instance's own
    (:meth:`recorder`).

    Example:
        >>> with LocalAws() as aws:  # doctest: +SKIP
        ...     aws.client("s3").create_bucket(Bucket="b", CreateBucketConfiguration={...})
    """

    def __init__(self, *, region: str = DEFAULT_REGION, execute_state_machines: bool = True) -> None:
        self.region = region
        self._execute_state_machines = execute_state_machines
        self._server: Any = None
        self.endpoint_url = ""
        self._recorders: dict[type[Any], Any] = {}
        self._recorders_lock = threading.Lock()

    def recorder(self, kind: type[_T]) -> _T:
        """This local AWS's one ``kind`` (what a behaviour records or keeps: the IAM ledger, the in-process Lambda
        deliveries, ...), made on first use by calling ``kind()``. Each LocalAws has its own: two in one process
        do not share them."""
        with self._recorders_lock:
            found = self._recorders.get(kind)
            if found is None:
                found = self._recorders[kind] = kind()
            return found

    def start(self) -> LocalAws:
        """Start the server (idempotent) and configure moto."""
        if self._server is not None:
            return self
        # werkzeug logs every request at INFO; keep test and demo output readable.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        self._server = server
        self.endpoint_url = f"http://{host}:{port}"
        self._post_config({"stepfunctions": {"execute_state_machine": self._execute_state_machines}})
        return self

    def stop(self) -> None:
        """Forget every resource and stop the server; the port is released and no thread is left running.

        moto keeps its state per process, not per server, so a later LocalAws in the same process would
        otherwise find this one's stacks and jobs.
        """
        if self._server is not None:
            self.reset()
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Forget every resource (moto's reset API), keeping the server up."""
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def session(self, *, credentials: Mapping[str, str] | None = None) -> boto3.Session:
        """A boto3 session for the local account; all its clients go to this server.

        Its credentials are the account's fake administrator keys, or ``credentials`` (``aws_access_key_id``,
        ``aws_secret_access_key``, ``aws_session_token``): a principal's own, see
        :func:`smx_debug.local.iam.principals.as_principal`.
        """
        if not self.endpoint_url:
            raise RuntimeError("LocalAws.session() before start(): use `with LocalAws() as aws:`")
        return _LocalSession(self.endpoint_url, region_name=self.region, **(credentials or _FAKE_CREDENTIALS))

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for ``service`` pointed at the local server (standard retries, a pool of
        :data:`MAX_POOL_CONNECTIONS`; a ``config`` given is merged over that)."""
        session: Any = self.session()  # boto3-stubs overloads client() per literal service name
        return session.client(service, **kwargs)

    def environ(self) -> dict[str, str]:
        """Environment variables that point an AWS SDK (or a subprocess) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": _FAKE_CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": _FAKE_CREDENTIALS["aws_secret_access_key"],
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """Point this process's default AWS clients (``boto3.client(...)``, the SDK's, the CLI's) here, then restore.

        Useful where code creates its own clients, as a notebook or the ``smx-debug`` CLI does. boto3's default
        session is this server's too, so ``sagemaker.Session()`` (which takes it) finds the account and its
        default bucket here, not through the real STS.
        """
        saved_session = boto3.DEFAULT_SESSION
        with scoped_environ(self.environ()):
            boto3.DEFAULT_SESSION = self.session()
            try:
                yield
            finally:
                boto3.DEFAULT_SESSION = saved_session

    def _post_config(self, config: dict[str, Any]) -> None:
        req = urllib.request.Request(
            f"{self.endpoint_url}/moto-api/config",
            data=json.dumps(config).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10):
            pass
