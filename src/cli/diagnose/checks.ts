/**
 * burrow diagnose's checks: their names, in the order they run and are
 * told, and what one says. The report (report.ts) and the JSON for
 * scripts are made from these records.
 */
import type { TunnelRequest } from "../../protocol/messages.ts";

/** Every check, in order; `remote` only with --remote; `tunnel` is one per tunnel of the config file (and, with --remote, of the server's config). */
export const CHECK_IDS = ["dns", "tcp", "tls", "proxy", "websocket", "direct", "clock", "protocol", "token", "remote", "tunnel"] as const;
export type CheckId = (typeof CHECK_IDS)[number];

/**
 * pass: it works; warn: it works, with something to know (a certificate
 * expiring soon, a direct port out of reach while the WebSocket carries
 * the agent); fail: the agent will not work until it is put right; skip:
 * it does not apply (no proxy set), or what it needs failed first.
 */
export type Status = "pass" | "warn" | "fail" | "skip";

export interface CheckResult {
  id: CheckId;
  /** A tunnel check's tunnel (its name in the config file). */
  tunnel?: string;
  status: Status;
  /** What was found, in a sentence. */
  detail: string;
  /** What to do, for warn and fail. */
  advice?: string;
  /** How long it took (ms), for checks that went on the network. */
  ms?: number;
  /** A code for scripts where the failure has one (ECONNREFUSED, CERT_HAS_EXPIRED, TOKEN_DISABLED...). */
  code?: string;
}

/** What every check is about, as the report's first words say it. */
export const CHECK_TITLES: Record<CheckId, string> = {
  dns: "the server's name resolves",
  tcp: "a TCP connection to the server's port",
  tls: "TLS: the certificate, for the name, not expired",
  proxy: "the proxy from the flags, the config file or the environment",
  websocket: "the agents' WebSocket path (/_burrow/connect)",
  direct: "the server's direct agent port",
  clock: "this machine's clock against the server's",
  protocol: "protocol and version compatible",
  token: "the token: valid, enabled, its user's limits",
  remote: "the server's config for this token (--remote), read as the agent reads it",
  tunnel: "a tunnel of the config file or the server's config: its name or port",
};

/** What diagnose checks with. */
export interface DiagnoseSettings {
  server: string;
  token: string;
  /** The proxy the agent would use, and where it was said. */
  proxy?: { url: string; from: string };
  insecure: boolean;
  /** The config file's tunnels (none without one). */
  tunnels: { name: string; request: TunnelRequest }[];
  /** The agent runs its token's remote config (`burrow start --remote`): its tunnels are checked too, beside the file's. */
  remote: boolean;
  configPath?: string;
  /** Each network step's time limit. */
  timeoutMs: number;
  /** Clocks further apart than this fail the clock check. */
  clockToleranceS: number;
}

export const skipped = (id: CheckId, why: string, tunnel?: string): CheckResult => ({ id, ...(tunnel !== undefined ? { tunnel } : {}), status: "skip", detail: why });

/** The first failed check, if any. */
export const firstFailure = (results: CheckResult[]) => results.find((r) => r.status === "fail");
