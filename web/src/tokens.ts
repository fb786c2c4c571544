// Access tokens per agent: in memory for this tab, and in localStorage when the user asks to remember them.

const key = (agentId: string) => `agentd.token.${agentId}`;
const session = new Map<string, string>();

export function getToken(agentId: string): string | null {
  return session.get(agentId) ?? localStorage.getItem(key(agentId));
}

export function isRemembered(agentId: string): boolean {
  return localStorage.getItem(key(agentId)) !== null;
}

export function setToken(agentId: string, token: string, remember: boolean): void {
  session.set(agentId, token);
  if (remember) localStorage.setItem(key(agentId), token);
  else localStorage.removeItem(key(agentId));
}

export function forgetToken(agentId: string): void {
  session.delete(agentId);
  localStorage.removeItem(key(agentId));
}

export function hasToken(agentId: string): boolean {
  return getToken(agentId) !== null;
}

// The last confirmation event seen per conversation, so that reopening it resumes the stream without repeats.
const eventKey = (conversationId: string) => `agentd.lastEvent.${conversationId}`;

export function lastEventId(conversationId: string): string | null {
  return localStorage.getItem(eventKey(conversationId));
}

export function setLastEventId(conversationId: string, id: string): void {
  localStorage.setItem(eventKey(conversationId), id);
}
