/**
 * The inspector API as the page sees it: the same endpoints and errors a
 * script uses (docs/inspector.md). Every failure becomes an
 * ApiError with a sentence a person can read.
 */
import type { TunnelKind } from "../../../protocol/kinds.ts";

export type HeaderList = [string, string][];

export interface Summary {
  id: number;
  tunnel: string;
  kind: "http" | "websocket";
  started_at: string;
  remote: string;
  method: string;
  path: string;
  status: number | null;
  state: "pending" | "done" | "failed";
  error: string | null;
  duration_ms: number | null;
  request_size: number;
  response_size: number;
  replay_of: number | null;
  /** The path route that served it (--route); null: the tunnel's own address. */
  route: string | null;
  websocket?: { messages_from_visitor: number; messages_from_service: number };
  /** "edge": the server's traffic policies answered it, and it never came to the agent. */
  answered_by: "service" | "edge";
  /** The server told what its traffic policies did with it (for one let through, a moment after its response). */
  policy_noted: boolean;
}

/** What the tunnel's traffic policies did with a request (null: none of its rules matched). */
/** A log field's value: any JSON value (a map or a list as the policy wrote it, its strings interpolated). */
export type LogValue = string | number | boolean | null | LogValue[] | { [name: string]: LogValue };
/** A log action's fields. */
export type LogFields = Record<string, LogValue>;

export interface PolicyView {
  /** The tunnel's own rules that matched the request, in order. */
  rules: string[];
  /**
   * The action that answered in the service's place (a refusal of the request, or a response rule that replaced
   * the service's answer), in which phase, whose layer it was (the server's rules are not named) and the status the
   * visitor got; null: the service's answer went to the visitor.
   */
  ended: { phase: "request" | "response"; by: "tunnel" | "server"; action: string; rule?: string; status: number | null } | null;
  /** The request's log actions' fields. */
  logs: LogFields[];
  /** Requests the server's policies answered just before this one and did not tell (past the pace it tells them at). */
  skipped_before: number;
  /** The response's phase: the tunnel's own rules that matched, each with its actions, and their log fields; null: none. */
  response: { rules: { rule: string; actions: string[] }[]; logs: LogFields[] } | null;
  /** The event stream's phase (on_event_stream_message, judged on the response's head): the tunnel's own rules that matched, each with its actions; null: none. */
  events: { rules: { rule: string; actions: string[] }[]; logs: LogFields[] } | null;
}

export interface Body {
  size: number;
  captured: number;
  truncated: boolean;
  content_type: string | null;
  content_encoding: string | null;
  base64: string;
  decoded: { encoding: string; size?: number; base64?: string; error?: string } | null;
}

export interface WsMessage {
  from: "visitor" | "service";
  at: string;
  type: "text" | "binary";
  size: number;
  truncated: boolean;
  text?: string;
  base64?: string;
}

export interface Detail extends Summary {
  request: { method: string; path: string; headers: HeaderList; body: Body };
  response: { status: number; headers: HeaderList; body: Body } | null;
  websocket?: Summary["websocket"] & { bytes_from_visitor: number; bytes_from_service: number; last_messages: WsMessage[] };
  policy: PolicyView | null;
}

export interface Tunnel {
  name: string;
  protocol: TunnelKind;
  public_url: string;
  local: string;
  host_header: string | null;
  inspect: boolean;
}

/** A udp tunnel's flow: one visitor address and port (GET /api/flows). */
export interface Flow {
  tunnel: string;
  remote: string;
  state: "open" | "ended";
  started_at: string;
  age_ms: number;
  datagrams_in: number;
  datagrams_out: number;
  bytes_in: number;
  bytes_out: number;
  dropped: number;
  error: string | null;
}

export interface ReplayEdits {
  method?: string;
  path?: string;
  headers?: HeaderList;
  body?: string;
}

export class ApiError extends Error {}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: body === undefined ? undefined : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError("The agent does not answer: is it still running?");
  }
  if (res.status === 204) return undefined as T;
  const data = (await res.json().catch(() => ({}))) as { error?: string };
  if (!res.ok) throw new ApiError(data.error ?? `The inspector answered ${res.status}.`);
  return data as T;
}

export const api = {
  tunnels: () => call<{ tunnels: Tunnel[] }>("GET", "/api/tunnels").then((r) => r.tunnels),
  flows: () => call<{ flows: Flow[] }>("GET", "/api/flows").then((r) => r.flows),
  list: () => call<{ requests: Summary[] }>("GET", "/api/requests").then((r) => r.requests),
  detail: (id: number) => call<Detail>("GET", `/api/requests/${id}`),
  replay: (id: number, edits?: ReplayEdits) => call<Summary>("POST", `/api/requests/${id}/replay`, edits ?? {}),
  clear: () => call<void>("DELETE", "/api/requests"),
};
