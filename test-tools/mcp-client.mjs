#!/usr/bin/env node
// An MCP client built on the official SDK (@modelcontextprotocol/sdk), for agentd's integration tests.
//
//   node test-tools/mcp-client.mjs --binary PATH [--calls JSON]
//       spawns `PATH mcp` over stdio with this process's environment (AGENTD_ACCESS_TOKEN, DATABASE_URL, ...)
//   node test-tools/mcp-client.mjs --url http://HOST:PORT/mcp [--calls JSON]
//       speaks Streamable HTTP, sending AGENTD_ACCESS_TOKEN as X-Agent-Access-Token
//
// Options: --elicit ANSWER declares the elicitation capability (form mode) and answers every
// `elicitation/create` with ANSWER: `approve` or `reject` (accepting with {"decision": ANSWER}), `accept` (accepting
// with {}), `decline` or `cancel`; --header NAME=VALUE adds an HTTP header (e.g. X-Owner-Token=own_...).
//
// It initializes, pings, lists the tools, calls each of `--calls` ([{"name": ..., "arguments": {...}}, ...]) in
// order and prints one JSON document on stdout:
//   {ok, protocolVersion, serverInfo, capabilities, instructions, sessionId, tools,
//    calls: [{name, result} | {name, error}], elicitations: [params...], transportErrors, stderr}
// A connection failure prints {ok: false, error, stderr} and exits 1.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

function parseArgs(argv) {
  const args = { calls: '[]', headers: {} };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`missing value for ${key}`);
    if (key === '--binary') args.binary = value;
    else if (key === '--url') args.url = value;
    else if (key === '--calls') args.calls = value;
    else if (key === '--elicit') args.elicit = value;
    else if (key === '--header') {
      const at = value.indexOf('=');
      args.headers[value.slice(0, at)] = value.slice(at + 1);
    }
    else throw new Error(`unknown option ${key}`);
  }
  if (!args.binary === !args.url) throw new Error('give exactly one of --binary PATH or --url URL');
  return args;
}

function errorJson(err) {
  return { message: String(err?.message ?? err), code: err?.code ?? null, data: err?.data ?? null };
}

// Passes everything through, noting the protocol version the server answered `initialize` with.
class RecordingTransport {
  constructor(inner) {
    this.inner = inner;
    this.negotiatedVersion = null;
  }
  async start() {
    this.inner.onmessage = (message, extra) => {
      if (typeof message?.result?.protocolVersion === 'string') this.negotiatedVersion = message.result.protocolVersion;
      this.onmessage?.(message, extra);
    };
    this.inner.onerror = (err) => this.onerror?.(err);
    this.inner.onclose = () => this.onclose?.();
    return this.inner.start();
  }
  send(message, options) {
    return this.inner.send(message, options);
  }
  close() {
    return this.inner.close();
  }
  get sessionId() {
    return this.inner.sessionId;
  }
  setProtocolVersion(version) {
    this.inner.setProtocolVersion?.(version);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const calls = JSON.parse(args.calls);
  const stderrChunks = [];
  const transportErrors = [];
  let transport;
  if (args.binary) {
    transport = new StdioClientTransport({
      command: args.binary,
      args: ['mcp'],
      env: { ...process.env },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk) => stderrChunks.push(chunk.toString()));
  } else {
    const token = process.env.AGENTD_ACCESS_TOKEN ?? '';
    transport = new StreamableHTTPClientTransport(new URL(args.url), {
      requestInit: { headers: { 'X-Agent-Access-Token': token, ...args.headers } },
    });
  }
  transport = new RecordingTransport(transport);
  const capabilities = args.elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: 'agentd-test-client', version: '0.0.0' }, { capabilities });
  const elicitations = [];
  if (args.elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      elicitations.push(request.params);
      if (args.elicit === 'approve' || args.elicit === 'reject') {
        return { action: 'accept', content: { decision: args.elicit } };
      }
      if (args.elicit === 'accept') return { action: 'accept', content: {} };
      return { action: args.elicit };
    });
  }
  client.onerror = (err) => transportErrors.push(String(err?.message ?? err));
  const stderr = async () => {
    await new Promise((resolve) => setTimeout(resolve, 100));
    return stderrChunks.join('');
  };
  try {
    await client.connect(transport);
  } catch (err) {
    await transport.close().catch(() => {});
    console.log(JSON.stringify({ ok: false, error: errorJson(err), transportErrors, stderr: await stderr() }));
    process.exit(1);
  }
  const out = {
    ok: true,
    protocolVersion: transport.negotiatedVersion,
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions() ?? null,
    sessionId: transport.sessionId ?? null,
    ping: null,
    tools: [],
    calls: [],
  };
  out.ping = await client.ping();
  out.tools = (await client.listTools()).tools;
  for (const call of calls) {
    try {
      const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
      out.calls.push({ name: call.name, result });
    } catch (err) {
      out.calls.push({ name: call.name, error: errorJson(err) });
    }
  }
  out.elicitations = elicitations;
  await client.close();
  out.transportErrors = transportErrors;
  out.stderr = await stderr();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.log(JSON.stringify({ ok: false, error: errorJson(err) }));
  process.exit(2);
});
