"""The clouds' real SDK clients over a scripted HTTP transport: no network, real request shapes.

GCP's ``google-cloud-compute`` clients and Azure's ``azure-mgmt-*`` clients send their
requests through a :class:`requests.Session`; :class:`StubHttp` is mounted on it and answers
each request from rules (HTTP method, a regex on the URL's path and query → status and JSON
body). So the method names a test calls, the URLs they build and the bodies they send are
the SDKs' own; a request no rule answers fails the test (HTTP 501 naming it) instead of
getting an empty success. Every request is recorded in :attr:`StubHttp.calls`::

    http = StubHttp([("GET", r"/projects/p/regions/us-east1$", 200, {"quotas": []})])
    client = gcp_client(compute_v1.RegionsClient, http)
    client.get(project="p", region="us-east1")
    assert http.calls[0].path == "/compute/v1/projects/p/regions/us-east1"
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
import urllib3
from requests.adapters import BaseAdapter

Body = Any  # JSON-able, or a callable (Call) -> JSON-able
Rule = tuple[str, str, int, Body]  # method, regex searched in "path?query", status, body


@dataclass(frozen=True)
class Call:
    """One HTTP request the stub transport received: method, path, query and JSON body."""
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any  # the decoded JSON body, or None

    @property
    def target(self) -> str:
        q = "&".join(f"{k}={v}" for k, vs in sorted(self.query.items()) for v in vs)
        return self.path + (f"?{q}" if q else "")


@dataclass
class StubHttp(BaseAdapter):
    """A requests transport that answers from scripted rules and records every call."""
    rules: Sequence[Rule] = ()
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        url = urlsplit(str(request.url))
        raw = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        call = Call(str(request.method), url.path, parse_qs(url.query), body)
        self.calls.append(call)
        for method, pattern, status, answer in self.rules:
            if method == call.method and re.search(pattern, call.target):
                return _response(request, status, answer(call) if callable(answer) else answer)
        return _response(request, 501, {"error": {"code": 501, "message": f"unscripted request "
                                                  f"{call.method} {call.target}"}})

    def close(self) -> None:
        pass


def _response(request: requests.PreparedRequest, status: int, body: Any) -> requests.Response:
    data = json.dumps(body).encode()
    r = requests.Response()
    r.status_code = status
    r.raw = urllib3.HTTPResponse(body=io.BytesIO(data), status=status, preload_content=False,
                                 headers={"Content-Type": "application/json"})
    r._content = data
    r.headers["Content-Type"] = "application/json"
    r.url = str(request.url)
    r.request = request
    r.reason = "OK" if status < 400 else "Error"
    return r


def gcp_client(cls: Callable[..., Any], http: StubHttp) -> Any:
    """A ``google.cloud.compute_v1`` client (REST) whose requests ``http`` answers."""
    from google.auth.credentials import AnonymousCredentials  # noqa: PLC0415 - an optional cloud SDK (the gcp/azure extras)

    client = cls(credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]
    client._transport._session.mount("https://", http)
    return client


@dataclass
class StubCredential:
    """An Azure token credential that hands out a fixed token (and counts the requests)."""

    token: str = "stub-token"
    scopes: list[tuple[str, ...]] = field(default_factory=list)

    def get_token(self, *scopes: str, **_: Any) -> Any:
        from azure.core.credentials import AccessToken  # noqa: PLC0415 - an optional cloud SDK (the gcp/azure extras)

        self.scopes.append(scopes)
        return AccessToken(self.token, 4102444800)

    def get_token_info(self, *scopes: str, **_: Any) -> Any:
        from azure.core.credentials import AccessTokenInfo  # noqa: PLC0415 - an optional cloud SDK (the gcp/azure extras)

        self.scopes.append(scopes)
        return AccessTokenInfo(self.token, 4102444800)


def azure_client(cls: Callable[..., Any], http: StubHttp, subscription: str = "sub-1",
                 credential: Any = None) -> Any:
    """An ``azure.mgmt.*`` management client whose requests ``http`` answers."""
    from azure.core.pipeline.transport import RequestsTransport  # noqa: PLC0415 - an optional cloud SDK (the gcp/azure extras)

    session = requests.Session()
    session.mount("https://", http)
    return cls(credential or StubCredential(), subscription,
               transport=RequestsTransport(session=session, session_owner=False))
