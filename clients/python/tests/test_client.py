"""The generated client against a real agentd (started by clients/test.sh): AGENTD_URL, AGENTD_RPC_URL (the anvil
node serving as "base"), AGENTD_ADMIN_TOKEN."""

from __future__ import annotations

import os
import time
import uuid

import httpx
import pytest

from agentd import AgentdError, connect, unwrap
from agentd_client.api.agents import create_agent, get_agent
from agentd_client.api.chat import chat
from agentd_client.api.wallets import create_transfer, get_balances, get_transfer, list_transactions
from agentd_client.models import (
    AgentCreatedView,
    BalanceView,
    CapabilityView,
    ChatRequest,
    CreateAgent,
    CreateAgentOwnerAddressesType0,
    NewTransfer,
    TransferStatusView,
)

OWNER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"  # anvil's dev account #1 (a public test key)


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run clients/test.sh")
    return value


@pytest.fixture(scope="module")
def agent() -> AgentCreatedView:
    admin = connect(env("AGENTD_URL"), admin_token=os.environ.get("AGENTD_ADMIN_TOKEN"))
    owners = CreateAgentOwnerAddressesType0()
    owners["base"] = OWNER
    body = CreateAgent(
        name="Python client test",
        chains=["base"],
        capabilities=[CapabilityView.READ, CapabilityView.TRANSACT],
        spending_cap=1.0,
        owner_addresses=owners,
    )
    return unwrap(create_agent.sync_detailed(client=admin, body=body))


def test_the_created_agent_answers_its_wallet_and_token(agent: AgentCreatedView) -> None:
    assert agent.access_token.startswith("agt_")
    assert agent.chains == ["base"]
    assert agent.wallet_addresses["base"].startswith("0x")


def test_get_the_agent_and_a_wrong_token_is_refused(agent: AgentCreatedView) -> None:
    client = connect(env("AGENTD_URL"), token=agent.access_token)
    detail = unwrap(get_agent.sync_detailed(agent.id, client=client))
    assert detail.id == agent.id
    assert detail.name == "Python client test"

    wrong = connect(env("AGENTD_URL"), token="agt_" + "A" * 43)
    with pytest.raises(AgentdError) as refused:
        unwrap(get_agent.sync_detailed(agent.id, client=wrong))
    assert refused.value.status == 401
    assert refused.value.code == "invalid_token"


def test_creating_without_the_admin_token_is_refused() -> None:
    if not os.environ.get("AGENTD_ADMIN_TOKEN"):
        pytest.skip("the server runs without ADMIN_TOKEN")
    with pytest.raises(AgentdError) as refused:
        unwrap(create_agent.sync_detailed(client=connect(env("AGENTD_URL")), body=CreateAgent(name="no admin")))
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")


def test_balances_transfer_chat_and_transactions(agent: AgentCreatedView) -> None:
    client = connect(env("AGENTD_URL"), token=agent.access_token)
    wallet = agent.wallet_addresses["base"]
    funded = httpx.post(
        env("AGENTD_RPC_URL"),
        json={"jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance", "params": [wallet, "0x8AC7230489E80000"]},
    )
    assert "error" not in funded.json()

    balances = unwrap(get_balances.sync_detailed(agent.id, client=client))
    base = balances.balances["base"]
    assert isinstance(base, BalanceView), base
    assert (base.wei, base.symbol) == ("10000000000000000000", "ETH")

    key = f"py-client-{uuid.uuid4()}"
    body = NewTransfer(chain="base", to=OWNER, amount="0.01")
    transfer = unwrap(create_transfer.sync_detailed(agent.id, client=client, body=body, idempotency_key=key))
    assert transfer.status == TransferStatusView.PENDING
    assert transfer.amount_wei == "10000000000000000"
    for _ in range(150):
        transfer = unwrap(get_transfer.sync_detailed(agent.id, transfer.id, client=client))
        if transfer.status == TransferStatusView.CONFIRMED:
            break
        time.sleep(0.2)
    assert transfer.status == TransferStatusView.CONFIRMED
    assert isinstance(transfer.tx_hash, str) and transfer.tx_hash.startswith("0x")

    # The same key and body answer the first transfer again: nothing is sent twice.
    again = unwrap(create_transfer.sync_detailed(agent.id, client=client, body=body, idempotency_key=key))
    assert again.id == transfer.id

    turn = unwrap(
        chat.sync_detailed(client=client, body=ChatRequest(agent_id=agent.id, message="what is my balance on base"))
    )
    assert any(call.tool == "get_balance" and not call.error for call in turn.chain_calls), turn.chain_calls
    assert turn.response

    history = unwrap(list_transactions.sync_detailed(agent.id, client=client, limit=10))
    listed = [tx for tx in history if tx.tx_hash == transfer.tx_hash]
    assert len(listed) == 1, history
    assert listed[0].to == OWNER
