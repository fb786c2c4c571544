// Runs against a real agentd (started by clients/test.sh): AGENTD_URL, AGENTD_RPC_URL (the anvil node serving as
// "base"), AGENTD_ADMIN_TOKEN. Every call goes through the typed client; a change of the document that breaks
// these calls fails the build (tsc) before the run.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { AgentdError, createAgentdClient, unwrap, type Schemas } from "../src/index.js";

const baseUrl = required("AGENTD_URL");
const rpcUrl = required("AGENTD_RPC_URL");
const adminToken = process.env.AGENTD_ADMIN_TOKEN;
const OWNER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"; // anvil's dev account #1 (a public test key)

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run clients/test.sh`);
  return value;
}

async function rpc(method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: unknown; error?: unknown };
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

let agent: Schemas["AgentCreatedView"];
let transfer: Schemas["TransferView"];

before(async () => {
  const admin = createAgentdClient({ baseUrl, ...(adminToken ? { adminToken } : {}) });
  agent = await unwrap(
    admin.POST("/api/agents", {
      body: {
        name: "TypeScript client test",
        chains: ["base"],
        capabilities: ["read", "transact", "analytics"],
        spending_cap: 1,
        owner_addresses: { base: OWNER },
      },
    }),
  );
});

test("the created agent answers its wallet and a token shown once", () => {
  assert.match(agent.access_token, /^agt_/);
  assert.deepEqual(agent.chains, ["base"]);
  assert.match(agent.wallet_addresses["base"] ?? "", /^0x[0-9a-fA-F]{40}$/);
});

test("creating an agent without the admin token is refused with the error shape", { skip: !adminToken }, async () => {
  const anonymous = createAgentdClient({ baseUrl });
  await assert.rejects(unwrap(anonymous.POST("/api/agents", { body: { name: "no admin" } })), (err: unknown) => {
    assert.ok(err instanceof AgentdError);
    assert.equal(err.status, 401);
    assert.equal(err.code, "unauthorized");
    return true;
  });
});

test("get the agent with its token; a wrong token is refused", async () => {
  const client = createAgentdClient({ baseUrl, token: agent.access_token });
  const detail = await unwrap(client.GET("/api/agents/{id}", { params: { path: { id: agent.id } } }));
  assert.equal(detail.id, agent.id);
  assert.equal(detail.name, "TypeScript client test");
  assert.equal(detail.is_active, true);

  const wrong = createAgentdClient({ baseUrl, token: `agt_${"A".repeat(43)}` });
  const { data, error, response } = await wrong.GET("/api/agents/{id}", { params: { path: { id: agent.id } } });
  assert.equal(data, undefined);
  assert.equal(response.status, 401);
  assert.equal(error?.error.code, "invalid_token");
});

test("balances, a transfer confirmed on chain, chat, transactions", async () => {
  const client = createAgentdClient({ baseUrl, token: agent.access_token });
  const wallet = agent.wallet_addresses["base"] ?? assert.fail("no base wallet");
  await rpc("anvil_setBalance", [wallet, "0x8AC7230489E80000"]); // 10 ETH

  const balances = await unwrap(
    client.GET("/api/agents/{id}/balances", { params: { path: { id: agent.id } } }),
  );
  const base = balances.balances["base"];
  assert.ok(base && "wei" in base, `base balance: ${JSON.stringify(base)}`);
  assert.equal(base.wei, "10000000000000000000");
  assert.equal(base.symbol, "ETH");

  transfer = await unwrap(
    client.POST("/api/agents/{id}/transfers", {
      params: { path: { id: agent.id }, header: { "Idempotency-Key": "ts-client-first-transfer" } },
      body: { chain: "base", to: OWNER, amount: "0.01" },
    }),
  );
  assert.equal(transfer.status, "pending");
  assert.equal(transfer.amount_wei, "10000000000000000");

  let status: string = transfer.status;
  for (let i = 0; i < 150 && status !== "confirmed"; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const current = await unwrap(
      client.GET("/api/agents/{id}/transfers/{transfer_id}", {
        params: { path: { id: agent.id, transfer_id: transfer.id } },
      }),
    );
    status = current.status;
    transfer = current;
  }
  assert.equal(status, "confirmed");
  assert.match(transfer.tx_hash ?? "", /^0x[0-9a-f]{64}$/);

  // The same key and body answer the first transfer again: nothing is sent twice.
  const again = await unwrap(
    client.POST("/api/agents/{id}/transfers", {
      params: { path: { id: agent.id }, header: { "Idempotency-Key": "ts-client-first-transfer" } },
      body: { chain: "base", to: OWNER, amount: "0.01" },
    }),
  );
  assert.equal(again.id, transfer.id);

  const turn = await unwrap(
    client.POST("/api/chat", { body: { agent_id: agent.id, message: "what is my balance on base" } }),
  );
  assert.ok(
    turn.chain_calls.some((call) => call.tool === "get_balance" && !call.error),
    JSON.stringify(turn.chain_calls),
  );
  assert.ok(turn.response.length > 0);

  const history = await unwrap(
    client.GET("/api/agents/{id}/transactions", { params: { path: { id: agent.id }, query: { limit: 10 } } }),
  );
  const listed = history.find((tx) => tx.tx_hash === transfer.tx_hash);
  assert.ok(listed, `transaction ${transfer.tx_hash} not listed: ${JSON.stringify(history)}`);
  assert.equal(listed.status, "confirmed");
  assert.equal(listed.to, OWNER);
});
