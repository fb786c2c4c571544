// A thin typed wrapper over openapi-fetch: `paths` comes from `src/schema.ts`, which `npm run generate` writes from
// the repository's OpenAPI document (web/openapi.json). Every call is checked against the document at compile time:
// paths, parameters, bodies and answers.
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };
/** The document's schemas by name, e.g. `Schemas["TransferView"]`. */
export type Schemas = components["schemas"];
export type AgentdClient = Client<paths>;

export interface AgentdClientOptions {
  /** The service's origin, e.g. `http://127.0.0.1:8080` (no `/api`). */
  baseUrl: string;
  /** An agent's access token (`agt_...`), sent as `X-Agent-Access-Token`. */
  token?: string;
  /** The operator's `ADMIN_TOKEN`, sent as `Authorization: Bearer ...` (creating and listing agents). */
  adminToken?: string;
  /** An owner session (`own_...`) from `POST /api/agents/{id}/owner-session`, sent as `X-Owner-Token`. */
  ownerToken?: string;
  /** Extra headers for every request. */
  headers?: Record<string, string>;
  /** A fetch implementation (defaults to the global one). */
  fetch?: ClientOptions["fetch"];
}

/** A client for one credential set: `client.GET("/api/agents/{id}", { params: { path: { id } } })`. */
export function createAgentdClient(options: AgentdClientOptions): AgentdClient {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers["X-Agent-Access-Token"] = options.token;
  if (options.adminToken) headers["Authorization"] = `Bearer ${options.adminToken}`;
  if (options.ownerToken) headers["X-Owner-Token"] = options.ownerToken;
  return createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    headers,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** An error answer of the service: `{"error": {"code", "message", "details"?}}` and its HTTP status. */
export class AgentdError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;

  constructor(status: number, code: string, message: string, details?: unknown) {
    super(`${status} ${code}: ${message}`);
    this.name = "AgentdError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

type Answer = { data?: unknown; error?: unknown; response: Response };

/**
 * Awaits an openapi-fetch call and answers its data (typed by the operation's success answer), or throws an
 * `AgentdError` for an error answer. A `204` answers `undefined`.
 */
export async function unwrap<R extends Answer>(call: Promise<R>): Promise<Exclude<R["data"], undefined>> {
  const answer = await call;
  if (answer.error === undefined && answer.response.ok) return answer.data as Exclude<R["data"], undefined>;
  const body = (answer.error ?? {}) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
  const code = typeof body.error?.code === "string" ? body.error.code : "http_error";
  const message = typeof body.error?.message === "string" ? body.error.message : answer.response.statusText;
  throw new AgentdError(answer.response.status, code, message, body.error?.details);
}
