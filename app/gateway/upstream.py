"""The upstream side: an HTTP client of the MCP server the gateway stands in front of.

Every request goes as it came — method, body, query and end-to-end headers
(`Authorization`, `Mcp-Session-Id`, `MCP-Protocol-Version`, `Accept`, …) — minus the
hop-by-hop headers, `Host` and `Last-Event-ID` (which the gateway answers itself).
Responses are streamed (`httpx`, `stream=True`), never read whole.

Content codings: the gateway asks the upstream for the codings it decodes
(`ACCEPT_ENCODING`, whatever the client asked for) and relays what it read decoded,
without `Content-Encoding`: it must read an SSE response to record it, and the body and
its header must never part. A response in a coding it cannot decode (the upstream chose
one it was not offered) is relayed as it came, its `Content-Encoding` with it, and an SSE
one is then not recorded (`decodable`). The timeouts and the
connection limit are settings (`EVENTLOG_GATEWAY_*`).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable, Mapping, Sequence

import httpx

from app.errors import UpstreamUnavailable
from app.settings.slices import GatewaySettings

# RFC 9110 §7.6.1 and the connection-specific fields; `accept-encoding` too: the gateway
# asks for the codings it decodes itself (`ACCEPT_ENCODING`), not the client's.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
LAST_EVENT_ID = "last-event-id"
_RESPONSE_DROPPED = HOP_BY_HOP | {"content-encoding", "content-length", "date", "server"}
# What httpx's `aiter_bytes` decodes (without the optional brotli and zstandard packages).
DECODED_CODINGS = frozenset({"identity", "gzip", "deflate"})
ACCEPT_ENCODING = "gzip, deflate"


def forwarded(
    headers: Iterable[tuple[str, str]], *, drop: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """The end-to-end request headers, without `Last-Event-ID` and those in `drop`."""
    dropped = HOP_BY_HOP | {LAST_EVENT_ID, *drop}
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    return [(n, v) for n, v in headers if n.lower() not in dropped and n.lower() not in named]


_PROXY_HEADERS = frozenset(
    {"forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port"}
    | {"x-real-ip"}
)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(proxies: Iterable[str]) -> tuple[Network, ...]:
    """The networks of `EVENTLOG_GATEWAY_TRUSTED_PROXIES` (addresses or CIDR blocks)."""
    return tuple(ipaddress.ip_network(proxy.strip(), strict=False) for proxy in proxies)


def is_trusted(peer: str | None, networks: Sequence[Network]) -> bool:
    """Whether the connection's peer address is one of the trusted proxies."""
    if peer is None or not networks:
        return False
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(address in network for network in networks)


def proxied(
    headers: Sequence[tuple[str, str]],
    *,
    peer: str | None,
    scheme: str,
    host: str | None,
    trusted: bool,
) -> list[tuple[str, str]]:
    """`headers` with the gateway's own proxy headers: a client's are kept (the gateway's
    hop appended) only when `trusted`, else dropped and replaced."""
    kept = [(n, v) for n, v in headers if trusted or n.lower() not in _PROXY_HEADERS]
    chain = ", ".join(v for n, v in kept if n.lower() == "x-forwarded-for")
    elements = ", ".join(v for n, v in kept if n.lower() == "forwarded")
    out = [(n, v) for n, v in kept if n.lower() not in {"x-forwarded-for", "forwarded"}]
    node = peer or "unknown"
    out.append(("x-forwarded-for", f"{chain}, {node}" if chain else node))
    element = f"for={_node(peer)};proto={scheme}" + (f";host={_quoted(host)}" if host else "")
    out.append(("forwarded", f"{elements}, {element}" if elements else element))
    present = {n.lower() for n, _ in out}
    if "x-forwarded-proto" not in present:
        out.append(("x-forwarded-proto", scheme))
    if host and "x-forwarded-host" not in present:
        out.append(("x-forwarded-host", host))
    return out


def _node(peer: str | None) -> str:
    """RFC 7239 §6: an IPv6 node is bracketed and quoted; an unknown one is `unknown`."""
    if peer is None:
        return "unknown"
    return f'"[{peer}]"' if ":" in peer else peer


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def decodable(headers: httpx.Headers) -> bool:
    """Whether the gateway decodes every content coding of a response (none counts)."""
    codings = headers.get("content-encoding", "").lower().split(",")
    return all(coding.strip() in DECODED_CODINGS for coding in codings if coding.strip())


def returned(headers: httpx.Headers) -> dict[str, str]:
    """The upstream response's headers a client is given with the body decoded; with a
    body relayed as it came (not `decodable`), its `Content-Encoding` too."""
    kept = {n: v for n, v in headers.items() if n.lower() not in _RESPONSE_DROPPED}
    if not decodable(headers):
        kept["content-encoding"] = headers["content-encoding"]
    return kept


class Upstream:
    """The one HTTP client of the upstream, for the process's lifetime."""

    def __init__(self, url: str, settings: GatewaySettings) -> None:
        self.url = httpx.URL(url)
        timeout = httpx.Timeout(
            connect=settings.connect_timeout_seconds,
            read=settings.read_timeout_seconds,
            write=settings.read_timeout_seconds,
            pool=settings.connect_timeout_seconds,
        )
        limits = httpx.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=min(100, settings.max_connections),
        )
        self._client = httpx.AsyncClient(
            timeout=timeout, limits=limits, follow_redirects=False, trust_env=False
        )
        self.last_latency: float | None = None

    async def open(
        self,
        method: str,
        headers: Iterable[tuple[str, str]],
        body: bytes = b"",
        query: str = "",
        *,
        last_event_id: str | None = None,
    ) -> httpx.Response:
        """Send a request; its response with the body still to be read (close it!).

        `UpstreamUnavailable` when the upstream cannot be reached or fails before answering.
        """
        url = self.url.copy_with(query=query.encode()) if query else self.url
        sent = [*headers, ("accept-encoding", ACCEPT_ENCODING)]
        if last_event_id is not None:
            sent.append(("last-event-id", last_event_id))
        request = self._client.build_request(method, url, headers=sent, content=body or None)
        started = time.monotonic()
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise UpstreamUnavailable(
                f"the upstream MCP server did not answer: {type(error).__name__}"
            ) from None
        self.last_latency = time.monotonic() - started
        return response

    async def reachable(self) -> bool:
        """Whether the upstream answers at all (any HTTP status) within the connect timeout."""
        request = self._client.build_request("GET", self.url, headers={"accept": "*/*"})
        try:
            response = await self._client.send(request, stream=True)  # headers only
        except httpx.HTTPError:
            return False
        await response.aclose()
        return True

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()


def header(headers: Mapping[str, str] | httpx.Headers, name: str) -> str | None:
    """A header's value, by name in any case."""
    return headers.get(name)
