"""A thin wrapper over the generated client (`agentd_client`, from web/openapi.json by generate.sh).

    from agentd import connect, unwrap
    from agentd_client.api.agents import get_agent

    client = connect("http://127.0.0.1:8080", token="agt_...")
    agent = unwrap(get_agent.sync_detailed(agent_id, client=client))
"""

from __future__ import annotations

from typing import TypeVar, cast

from agentd_client import AuthenticatedClient, Client
from agentd_client.models import ErrorBody
from agentd_client.types import Response

T = TypeVar("T")


def connect(
    base_url: str,
    *,
    token: str | None = None,
    admin_token: str | None = None,
    owner_token: str | None = None,
    timeout: float = 30.0,
) -> AuthenticatedClient:
    """A client for one credential set: an agent's token (`X-Agent-Access-Token`), the operator's ADMIN_TOKEN
    (`Authorization: Bearer`), an owner session (`X-Owner-Token`); any of them, or none."""
    import httpx

    base_url = base_url.rstrip("/")
    headers: dict[str, str] = {}
    if admin_token:
        headers["Authorization"] = f"Bearer {admin_token}"
    if owner_token:
        headers["X-Owner-Token"] = owner_token
    if token:
        return AuthenticatedClient(
            base_url=base_url,
            token=token,
            prefix="",
            auth_header_name="X-Agent-Access-Token",
            headers=headers,
            timeout=httpx.Timeout(timeout),
        )
    # The generated operations are typed for AuthenticatedClient; without an agent token the other credentials (or
    # none, for a server without ADMIN_TOKEN) travel as plain headers, which a Client sends alike.
    return cast(AuthenticatedClient, Client(base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout)))


class AgentdError(Exception):
    """An error answer of the service: `{"error": {"code", "message"}}` and its HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def unwrap(response: Response[T | ErrorBody]) -> T:
    """The parsed success answer of a `sync_detailed` call, or `AgentdError` for an error answer."""
    parsed = response.parsed
    if isinstance(parsed, ErrorBody):
        raise AgentdError(int(response.status_code), parsed.error.code, parsed.error.message)
    if int(response.status_code) >= 400:
        raise AgentdError(int(response.status_code), "http_error", "an answer the document does not describe")
    return cast(T, parsed)
