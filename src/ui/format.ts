/**
 * Numbers and dates for people. Bytes count in binary steps (1 KB = 1024 B,
 * as docs/operations.md's 10 GB = 10737418240 example does); every date and time is
 * UTC, the server's calendar for traffic days and quota periods, and says so.
 */
import { KIND_UNITS, kindNamed, reachedByName, reachedByPort } from "../protocol/kinds.ts";

/** A quota's period, as the server names it. */
export type TrafficPeriod = "daily" | "monthly" | "quarterly";

/** Where the public side is, as GET /api/server says it (the portal knows it from its own address). */
export interface ServerInfo {
  domain: string;
  edge_url: string;
  tcp_host: string;
}

export const UNITS = ["B", "KB", "MB", "GB", "TB", "PB"] as const;
export type Unit = (typeof UNITS)[number];
export const unitBytes = (unit: Unit) => 1024 ** UNITS.indexOf(unit);

/** 0 -> "0 B", 1536 -> "1.5 KB", 123456789 -> "118 MB". */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "–";
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  if (i === 0) return `${Math.round(v)} B`;
  const rounded = v < 10 ? Math.round(v * 10) / 10 : Math.round(v);
  if (rounded >= 1024 && i < UNITS.length - 1) return `1 ${UNITS[i + 1]}`;
  return `${rounded} ${UNITS[i]}`;
}

/** A byte count as a number and the largest unit that keeps it readable, for editing. */
export function splitBytes(n: number): { value: number; unit: Unit } {
  if (n === 0) return { value: 0, unit: "GB" };
  for (let i = UNITS.length - 1; i > 0; i--) {
    const size = 1024 ** i;
    const v = n / size;
    // exact or near-exact in this unit, with at most 3 decimals
    if (v >= 1 && Math.abs(Math.round(v * 1000) / 1000 - v) * size < 1) return { value: Math.round(v * 1000) / 1000, unit: UNITS[i]! };
  }
  return { value: n, unit: "B" };
}

export const PERIOD_WORDS: Record<TrafficPeriod, { per: string; noun: string }> = {
  daily: { per: "per day", noun: "today" },
  monthly: { per: "per month", noun: "this month" },
  quarterly: { per: "per quarter", noun: "this quarter" },
};

/** "10 GB per month", or "No limit". */
export function formatQuota(limit: number, period: TrafficPeriod): string {
  return limit === 0 ? "No limit" : `${formatBytes(limit)} ${PERIOD_WORDS[period].per}`;
}

export const formatLimit = (n: number) => (n === 0 ? "No limit" : String(n));

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** "YYYY-MM-DD" of a UTC day. */
export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/** The first UTC day of the user's current quota period, as core/periods.ts counts it. */
export function periodStart(period: TrafficPeriod, now = new Date()): Date {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  if (period === "daily") return new Date(Date.UTC(y, m, now.getUTCDate()));
  if (period === "monthly") return new Date(Date.UTC(y, m, 1));
  return new Date(Date.UTC(y, m - (m % 3), 1));
}

/** The first UTC day of the next period: when the quota resets. */
export function periodEnd(period: TrafficPeriod, now = new Date()): Date {
  const start = periodStart(period, now);
  if (period === "daily") return new Date(start.getTime() + 86_400_000);
  return new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + (period === "monthly" ? 1 : 3), 1));
}

/** "Jun 3" from "2026-06-03" or a Date (UTC). */
export function shortDay(day: string | Date): string {
  const d = typeof day === "string" ? new Date(`${day}T00:00:00Z`) : day;
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
}

/** "Jun 3, 2026" (UTC). */
export function longDay(day: string | Date): string {
  const d = typeof day === "string" ? new Date(`${day}T00:00:00Z`) : day;
  return `${shortDay(d)}, ${d.getUTCFullYear()}`;
}

/** An API timestamp (ISO 8601 with Z, or an active tunnel's "YYYY-MM-DD HH:MM:SS" in UTC) as a Date. */
export function parseUtc(s: string): Date {
  return new Date(s.includes("T") ? s : `${s.replace(" ", "T")}Z`);
}

/** "2026-06-03 14:05 UTC". */
export function utcDateTime(s: string | Date): string {
  const d = typeof s === "string" ? parseUtc(s) : s;
  return Number.isNaN(d.getTime()) ? "–" : `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

/** "just now", "5 min ago", "3 h ago", "2 days ago", or the date past a month. */
export function ago(s: string | Date, now = Date.now()): string {
  const d = typeof s === "string" ? parseUtc(s) : s;
  const seconds = Math.max(0, Math.round((now - d.getTime()) / 1000));
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  if (days < 31) return `${days} day${days === 1 ? "" : "s"} ago`;
  return longDay(d);
}

/** "1 h 05 min", for how long a tunnel has been up. */
export function duration(since: string | Date, now = Date.now()): string {
  const d = typeof since === "string" ? parseUtc(since) : since;
  const s = Math.max(0, Math.floor((now - d.getTime()) / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${String(m % 60).padStart(2, "0")} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** The last `days` UTC days, oldest first, ending today: the analytics window. */
export function lastDays(days: number, now = new Date()): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: days }, (_, i) => utcDay(new Date(today - (days - 1 - i) * 86_400_000)));
}

/**
 * A tunnel's public address for the panel and the portal, as its kind
 * writes it (protocol/kinds/): "alice.localhost:8080" linked to
 * http://alice.localhost:8080 for http (a kind whose address is a link, on
 * the edge's scheme and port), "tls://alice.localhost" for tls (the port it
 * passes through on is the server's to say), "localhost:20417" for tcp,
 * "udp://localhost:20417" for udp. A custom hostname is shown before the
 * subdomain: it is what its owner made the tunnel for.
 */
export function publicAddress(server: ServerInfo | undefined, t: { protocol: string; subdomain?: string; hostname?: string; port?: number; private?: { target: string } }): { text: string; href?: string } {
  // a private tunnel has no public address: its owner and those it is shared with connect to it by name
  if (t.private) return { text: `private: ${t.private.target}` };
  const kind = kindNamed(t.protocol);
  const shown = kind === undefined ? undefined : KIND_UNITS[kind].display;
  if (kind !== undefined && shown !== undefined && reachedByName(kind) && (t.hostname || t.subdomain)) {
    if (shown.link) {
      if (!server?.edge_url) return { text: (t.hostname || t.subdomain)! };
      const edge = new URL(server.edge_url);
      const host = t.hostname || `${t.subdomain}.${edge.hostname}`;
      const href = shown.address({ host, port: edge.port === "" ? undefined : Number(edge.port), web: edge.protocol === "https:" ? "https" : "http" });
      return { text: href.replace(/^https?:\/\//, ""), href };
    }
    if (t.hostname) return { text: shown.address({ host: t.hostname }) };
    return { text: server?.domain ? shown.address({ host: `${t.subdomain}.${server.domain}` }) : t.subdomain! };
  }
  // reached by a port (or a kind this page does not know): the server's host and the port
  if (!server?.tcp_host) return { text: `${t.protocol} port ${t.port}` };
  return { text: kind !== undefined && shown !== undefined && reachedByPort(kind) ? shown.address({ host: server.tcp_host, port: t.port }) : `${server.tcp_host}:${t.port}` };
}
