"""A minimal agent framework on agentd's MCP server over stdio (`agentd mcp`), with the official `mcp` Python SDK.

    AGENTD_ACCESS_TOKEN=agt_... DATABASE_URL=... ENCRYPTION_KEY=... RPC_URL_BASE=... \
        python agent.py [RECIPIENT] [AMOUNT]

It spawns `agentd mcp` (AGENTD_BIN, default `agentd` on PATH) with this environment, which is the server's own
configuration: the same database and encryption key as the running service. It turns the tool list into the
function definitions an LLM would be given, then runs a fixed plan in place of a model: read the balance on base,
then send AMOUNT (default 0.001) ETH to RECIPIENT if the balance covers it. agentd applies the agent's capabilities,
cap, policy and approvals to every call; a refused call comes back as a tool error (`isError`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from decimal import Decimal
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

RECIPIENT = sys.argv[1] if len(sys.argv) > 1 else "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
AMOUNT = sys.argv[2] if len(sys.argv) > 2 else "0.001"


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, arguments)
    value = result.structured_content
    if value is None and result.content and result.content[0].type == "text":
        value = json.loads(result.content[0].text)
    if result.is_error:
        raise RuntimeError(f"{name} refused: {json.dumps(value)}")
    return value or {}


async def main() -> None:
    if not os.environ.get("AGENTD_ACCESS_TOKEN"):
        raise SystemExit("set AGENTD_ACCESS_TOKEN to the agent's access token")
    server = StdioServerParameters(command=os.environ.get("AGENTD_BIN", "agentd"), args=["mcp"], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        functions = [{"name": t.name, "description": t.description, "parameters": t.input_schema} for t in tools]
        print("tools:", ", ".join(f["name"] for f in functions))

        balance = await call(session, "get_balance", {"chain": "base"})
        print(f"balance on base: {balance['formatted']} {balance['symbol']}")
        if Decimal(balance["formatted"]) < Decimal(AMOUNT):
            print("not enough to send; stopping")
            return
        sent = await call(session, "send_native", {"chain": "base", "to": RECIPIENT, "amount": AMOUNT})
        print(f"send_native: {sent['status']} {sent.get('tx_hash') or ''}".rstrip())


if __name__ == "__main__":
    asyncio.run(main())
