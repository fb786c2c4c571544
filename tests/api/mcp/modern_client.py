"""An MCP 2026-07-28 client on the official MCP Python SDK 2.x (`mcp` on PyPI, venv of `scripts/install.sh
mcp-python`), driven by tests/api/mcp/modern.rs.

    python modern_client.py '<json>'

The JSON gives `urls` (one or more instances of the service: requests go to them in turn, as behind a round-robin
load balancer, over one connection of the SDK's Streamable HTTP client), `token` (the agent's, sent as
`X-Agent-Access-Token` on every request), `calls` (tool calls: `{"name", "arguments"}`) and `tasks` (whether to
declare the Tasks extension, `io.modelcontextprotocol/tasks`, and follow a task handle through `tasks/get` until it
ends). Prints one JSON line: the negotiated version, the discover result, the tools, each call's result (or error),
the tasks' polled statuses, and which instance answered each request.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, Literal

import httpx2
from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Result
from pydantic import Field

TASKS = "io.modelcontextprotocol/tasks"


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next instance, recording (method, instance index)."""

    def __init__(self, urls: list[str]) -> None:
        self.targets = [httpx2.URL(u) for u in urls]
        self.inner = httpx2.AsyncHTTPTransport()
        self.turn = 0
        self.served: list[list[Any]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        index = self.turn % len(self.targets)
        self.turn += 1
        target = self.targets[index]
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        self.served.append([request.headers.get("mcp-method"), index])
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class TaskHandle(Result):
    """A `CreateTaskResult` (`resultType: "task"`)."""

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None


class Tasks(ClientExtension):
    """The Tasks extension as a client follows it: a task handle is polled with `tasks/get` until it ends."""

    identifier = TASKS

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.followed: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.follow)]

    async def follow(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        record: dict[str, Any] = {"handle": handle.model_dump(by_alias=True, mode="json"), "polls": []}
        self.followed.append(record)
        deadline = time.monotonic() + self.timeout
        while True:
            data: dict[str, Any] = {"method": "tasks/get", "params": {"taskId": handle.task_id}}
            opts: dict[str, Any] = {}
            ctx.session._stamp(data, opts)  # the SDK's own per-request `_meta` and headers (2026-07-28)
            opts["headers"]["Mcp-Name"] = handle.task_id  # the Tasks extension names its task in `Mcp-Name`
            task = await ctx.session._dispatcher.send_raw_request("tasks/get", data["params"], opts)
            record["polls"].append(task)
            status = task.get("status")
            if status == "completed":
                return CallToolResult.model_validate(task["result"])
            if status in ("failed", "cancelled"):
                return CallToolResult(content=[], structured_content={"task": task}, is_error=True)
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {handle.task_id} still {status}")
            await asyncio.sleep(min((handle.poll_interval_ms or 1000) / 1000, 0.5))


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    balancer = RoundRobin(spec["urls"])
    http = httpx2.AsyncClient(
        transport=balancer,
        headers={"X-Agent-Access-Token": spec["token"]},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    tasks = Tasks(timeout=spec.get("task_timeout", 90))
    extensions = [tasks] if spec.get("tasks") else None
    out: dict[str, Any] = {"calls": []}
    async with http:
        transport = streamable_http_client(spec["urls"][0], http_client=http)
        async with Client(transport, mode="auto", extensions=extensions, cache=None) as client:
            out["protocol_version"] = client.protocol_version
            discover = client.session.discover_result
            out["discover"] = discover.model_dump(by_alias=True, mode="json") if discover else None
            listed = await client.list_tools()
            out["tools"] = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools]
            for call in spec.get("calls", []):
                try:
                    result = await client.call_tool(call["name"], call.get("arguments") or {})
                    out["calls"].append({"result": result.model_dump(by_alias=True, mode="json", exclude_none=True)})
                except Exception as e:  # noqa: BLE001 - reported to the test as it is
                    out["calls"].append({"error": f"{type(e).__name__}: {e}"})
    out["tasks"] = tasks.followed
    out["served"] = balancer.served
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
