// A minimal agent framework on agentd's MCP server (Streamable HTTP), with the official MCP TypeScript SDK.
//
//   AGENTD_URL=http://127.0.0.1:8080 AGENTD_ACCESS_TOKEN=agt_... node agent.mjs [RECIPIENT] [AMOUNT]
//
// It connects as the agent, turns the server's tool list into the function definitions an LLM would be given, and
// runs a fixed plan in place of a model: read the balance on base, then send AMOUNT (default 0.001) ETH to RECIPIENT
// if the balance covers it. agentd applies the agent's capabilities, cap, policy and approvals to every call, as in
// chat: a refused call comes back as a tool error (`isError`), which an LLM would read and answer to.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const baseUrl = process.env.AGENTD_URL ?? "http://127.0.0.1:8080";
const token = process.env.AGENTD_ACCESS_TOKEN;
if (!token) throw new Error("set AGENTD_ACCESS_TOKEN to the agent's access token");
const recipient = process.argv[2] ?? "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const amount = process.argv[3] ?? "0.001";

const transport = new StreamableHTTPClientTransport(new URL("/mcp", baseUrl), {
  requestInit: { headers: { "X-Agent-Access-Token": token } },
});
const client = new Client({ name: "agentd-example-agent", version: "0.1.0" });
await client.connect(transport);

// What a framework hands its model: name, description and JSON Schema of each tool.
const { tools } = await client.listTools();
const functions = tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.inputSchema }));
console.log(`tools: ${functions.map((f) => f.name).join(", ")}`);

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  const value = result.structuredContent ?? JSON.parse(result.content?.[0]?.text ?? "null");
  if (result.isError) throw new Error(`${name} refused: ${JSON.stringify(value)}`);
  return value;
}

const balance = await call("get_balance", { chain: "base" });
console.log(`balance on base: ${balance.formatted} ${balance.symbol}`);
if (Number(balance.formatted) < Number(amount)) {
  console.log("not enough to send; stopping");
} else {
  const sent = await call("send_native", { chain: "base", to: recipient, amount });
  console.log(`send_native: ${sent.status}${sent.tx_hash ? ` ${sent.tx_hash}` : ""}`);
}
await client.close();
