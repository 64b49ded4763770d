/**
 * The audit log in words: each action's name for people, and an entry's
 * details as a short line. Pure, so tested without a browser.
 */
import type { AuditEntry } from "./api.ts";

/** Every action the server records (core/audit.ts AUDIT_ACTIONS; a test keeps the two lists equal), with its words. */
export const ACTION_WORDS: Record<string, string> = {
  "auth.login": "Sign in",
  "auth.logout": "Sign out",
  "user.create": "User created",
  "user.update": "User changed",
  "user.delete": "User deleted",
  "token.create": "Token generated",
  "token.revoke": "Token revoked",
  "ssh-key.create": "SSH key added",
  "ssh-key.delete": "SSH key removed",
  "token.config": "Device's tunnels set",
  "device.config": "Device's tunnels set on the portal",
  "agent.restart": "Agent asked to reconnect",
  "agent.update": "Agent asked to update",
  "domain.reserve": "Subdomain reserved",
  "domain.release": "Subdomain released",
  "hostname.create": "Hostname added",
  "hostname.verify": "Hostname verified",
  "hostname.delete": "Hostname deleted",
  "webhook.create": "Webhook made",
  "webhook.update": "Webhook changed",
  "webhook.delete": "Webhook deleted",
  "webhook.rotate": "Webhook secret rotated",
  "webhook.retry": "Webhook delivery sent again",
  "key.create": "API key made",
  "key.revoke": "API key revoked",
  "database.backup": "Backup downloaded",
  "portal.login": "Portal sign-in",
  "portal.logout": "Portal sign-out",
  "portal.password": "Password changed on the portal",
  "device.approve": "Device login approved",
  "device.deny": "Device login denied",
  "device.login": "Device logged in",
  "invitation.create": "Invitation made",
  "invitation.delete": "Invitation withdrawn",
  "invitation.accept": "Invitation used",
  "private.connect": "Connected to a private tunnel",
  "agent.refused": "Agent refused",
  "policy.create": "Traffic policy added",
  "policy.update": "Traffic policy changed",
  "policy.delete": "Traffic policy deleted",
  "ssh.session": "SSH session",
  "ssh.refused": "SSH refused",
};

export const actionWords = (action: string) => ACTION_WORDS[action] ?? action;

const value = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

/** "max_tunnels 3 → 5, enabled true → false, password changed"; "" when there is nothing to say. */
export function detailsLine(e: Pick<AuditEntry, "details">): string {
  const d = e.details;
  if (!d) return "";
  const parts: string[] = [];
  for (const [k, v] of Object.entries(d)) {
    if (k === "changes" && v && typeof v === "object") {
      for (const [field, c] of Object.entries(v as Record<string, { from: unknown; to: unknown }>)) parts.push(`${field} ${value(c.from)} → ${value(c.to)}`);
    } else if (k === "fields" && v && typeof v === "object") {
      parts.push(Object.entries(v as Record<string, unknown>).map(([f, x]) => `${f} ${value(x)}`).join(", "));
    } else if (k === "password_changed") {
      if (v) parts.push("password changed");
    } else if (k === "requested" && Array.isArray(v)) {
      parts.push(`tried ${v.join(", ")}`);
    } else {
      parts.push(`${k} ${value(v)}`);
    }
  }
  return parts.join(", ");
}

/** Who, in words: "admin", "admin (API key #3)", or "—" for nobody known. */
export function actorWords(e: Pick<AuditEntry, "username" | "key_id" | "token_id">): string {
  const name = e.username ?? "—";
  if (e.key_id !== null) return `${name} (API key #${e.key_id})`;
  if (e.token_id !== null) return `${name} (token #${e.token_id})`;
  return name;
}
