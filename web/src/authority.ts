// Owner authority (docs/api.md §10): the admin token (`Authorization: Bearer`), kept like agent tokens are (in
// memory for this tab, in localStorage when the user asks to remember it), and owner sessions (`X-Owner-Token`,
// 15 minutes) per agent, kept in sessionStorage until they expire. Neither is ever logged.

const ADMIN_KEY = 'agentd.adminToken';
const ownerKey = (agentId: string) => `agentd.ownerSession.${agentId}`;

let adminForTab: string | null = null;

export interface OwnerSession {
  token: string;
  /** When it ends; for a pasted token, the latest it can end (15 minutes after it was pasted). */
  expires_at: string;
  /** The owner address that signed in, when the console did the sign-in; null for a pasted token. */
  address: string | null;
}

/** Tells the open views that the authority changed (they re-render their status lines). */
function changed(): void {
  window.dispatchEvent(new Event('agentd:authority'));
}

/** Calls `fn` whenever the authority changes, while `el` stays in the page. */
export function onAuthorityChange(el: Element, fn: () => void): void {
  const listener = () => {
    if (!el.isConnected) {
      window.removeEventListener('agentd:authority', listener);
      return;
    }
    fn();
  };
  window.addEventListener('agentd:authority', listener);
}

export function adminToken(): string | null {
  return adminForTab ?? localStorage.getItem(ADMIN_KEY);
}

export function isAdminRemembered(): boolean {
  return localStorage.getItem(ADMIN_KEY) !== null;
}

/** Keeps the admin token for this tab; `remember` also keeps it in this browser. `null` forgets it. */
export function setAdminToken(token: string | null, remember = true): void {
  adminForTab = token;
  if (token && remember) localStorage.setItem(ADMIN_KEY, token);
  else localStorage.removeItem(ADMIN_KEY);
  changed();
}

/** The agent's owner session, while it lasts. */
export function ownerSession(agentId: string): OwnerSession | null {
  const raw = sessionStorage.getItem(ownerKey(agentId));
  if (!raw) return null;
  try {
    const session = JSON.parse(raw) as OwnerSession;
    // A minute of margin: a session about to expire is treated as gone rather than failing mid-request.
    if (typeof session.token === 'string' && Date.parse(session.expires_at) - 60_000 > Date.now()) return session;
  } catch {
    // unreadable: dropped below
  }
  sessionStorage.removeItem(ownerKey(agentId));
  return null;
}

export function setOwnerSession(agentId: string, session: OwnerSession): void {
  sessionStorage.setItem(ownerKey(agentId), JSON.stringify(session));
  changed();
}

export function clearOwnerSession(agentId: string): void {
  sessionStorage.removeItem(ownerKey(agentId));
  changed();
}

/**
 * The owner credential a request for `agentId` carries: its owner session when there is one (the user signed in
 * for this agent), else the admin token, else nothing.
 */
export function ownerCredential(agentId: string): { header: string; value: string } | null {
  const session = ownerSession(agentId);
  if (session) return { header: 'X-Owner-Token', value: session.token };
  const admin = adminToken();
  if (admin) return { header: 'Authorization', value: `Bearer ${admin}` };
  return null;
}

/** A sentence saying what owner authority the console holds for the agent. */
export function authorityText(agentId: string): string {
  const session = ownerSession(agentId);
  if (session) {
    const until = new Date(session.expires_at).toLocaleTimeString();
    if (!session.address) {
      return `Using a pasted owner session (${session.token.slice(0, 8)}…), checked with the server; it ends 15 minutes after it was opened, by ${until} at the latest.`;
    }
    return `Signed in as owner ${session.address} until ${until}.`;
  }
  if (adminToken()) return `Using the admin token, checked with the server (${isAdminRemembered() ? 'remembered in this browser' : 'this tab only'}).`;
  return 'No owner authority: changes that need the owner will be refused.';
}
