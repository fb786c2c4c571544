// The owner's reason for rejecting a request. `POST …/transfers/{id}/reject` takes no body (docs/api.md §11), so the
// service cannot record it: the console keeps it in this browser's local storage, keyed by the transfer id, and
// shows it beside the rejection in the history and the audit view, marked as a note of this browser (it is not part
// of the hash-chained audit log).

const key = (transferId: string) => `agentd.rejectReason.${transferId}`;

export interface RejectNote {
  reason: string;
  at: string;
}

export function setRejectNote(transferId: string, reason: string): void {
  const text = reason.trim();
  if (!text) return;
  try {
    localStorage.setItem(key(transferId), JSON.stringify({ reason: text.slice(0, 500), at: new Date().toISOString() }));
  } catch {
    // storage full or refused: the reason is only lost to this browser's views
  }
}

export function rejectNote(transferId: string): RejectNote | null {
  const raw = localStorage.getItem(key(transferId));
  if (!raw) return null;
  try {
    const note = JSON.parse(raw) as RejectNote;
    return typeof note.reason === 'string' ? note : null;
  } catch {
    return null;
  }
}
