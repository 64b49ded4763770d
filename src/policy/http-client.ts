/**
 * What the http-request action asks of the edge: one outgoing request,
 * sent within the server's bounds (where it may go, how long it may take,
 * how much of the answer is read, how many are out at once), answered
 * with what came back or why nothing did, as a value with a stable code.
 * The engine says what to send; the edge (edge/traffic-policy/
 * outgoing-requests.ts) knows the network and its rules. Without one (the
 * offline commands), the action fails with UNAVAILABLE.
 */

/** Why a request got no answer the action can use: `actions.ngrok.http_request.error.code`. */
export const HTTP_REQUEST_ERRORS = {
  /** The URL, as interpolated for this request, is not an http(s) URL. */
  BAD_URL: "HTTP_REQUEST_BAD_URL",
  /** The URL, a header or the body did not interpolate for this request (the run tells why). */
  INTERPOLATION: "HTTP_REQUEST_INTERPOLATION_FAILED",
  /** Its host is this machine, or has a loopback, private, link-local or other non-public address (--policy-http-request-allow-private). */
  ADDRESS_REFUSED: "HTTP_REQUEST_ADDRESS_REFUSED",
  /** Its host does not resolve. */
  NOT_RESOLVED: "HTTP_REQUEST_NOT_RESOLVED",
  /** The whole exchange took longer than the action's timeout (at most --policy-http-request-timeout). */
  TIMEOUT: "HTTP_REQUEST_TIMEOUT",
  /** The answer's body is larger than --policy-http-request-max-bytes. */
  TOO_LARGE: "HTTP_REQUEST_RESPONSE_TOO_LARGE",
  /** More redirects than max_redirects. */
  TOO_MANY_REDIRECTS: "HTTP_REQUEST_TOO_MANY_REDIRECTS",
  /** The server has --policy-http-request-concurrency requests out already, or the run's tunnel --policy-http-request-concurrency-per-tunnel. */
  BUSY: "HTTP_REQUEST_BUSY",
  /** The connection failed (refused, reset, TLS). */
  FAILED: "HTTP_REQUEST_FAILED",
  /** The same visitor's request has come through http-request actions too many times (a loop). */
  LOOP: "HTTP_REQUEST_LOOP",
  /** The run made --policy-http-request-max-per-run requests already. */
  TOO_MANY: "HTTP_REQUEST_TOO_MANY",
  /** Nothing sends requests here (the offline commands). */
  UNAVAILABLE: "HTTP_REQUEST_UNAVAILABLE",
} as const;

export type HttpRequestErrorCode = (typeof HTTP_REQUEST_ERRORS)[keyof typeof HTTP_REQUEST_ERRORS];

export interface OutgoingRequest {
  method: string;
  url: string;
  /** Lower-case names; the client adds none of these. */
  headers: [string, string][];
  body?: string;
  /** The action's timeout; the client holds it to its own cap. */
  timeoutMs: number;
  /** 0: a 3xx is the answer; n: up to n followed, the next one fails. */
  maxRedirects: number;
  /** The tunnel whose run asks (tunnelKey): its share of the places is capped, the operator's layers' requests counted in it. */
  tunnel: string;
}

/** Who a run's requests count against: the tunnel's id, the same for its life; its kind and name where it has none (the offline commands, tests). */
export function tunnelKey(t: { id?: string; kind: string; name: string }): string {
  return t.id ?? `${t.kind}:${t.name}`;
}

/** One answer, the last of its redirects. */
export interface OutgoingAnswer {
  /** The address it came from. */
  resolvedIp: string;
  status: number;
  /** Lower-case names, in order. */
  headers: [string, string][];
  body: string;
  timeMs: number;
}

export type OutgoingResult = { ok: true; answer: OutgoingAnswer } | { ok: false; code: HttpRequestErrorCode; message: string; timeMs: number; resolvedIp?: string };

export interface PolicyHttpClient {
  /** The longest any request may take (--policy-http-request-timeout), in ms. */
  readonly maxTimeoutMs: number;
  /** Requests one run of a phase of a policy may make (--policy-http-request-max-per-run): a visitor's request is not made into many. */
  readonly maxPerRun: number;
  /** Never throws: a failure is a result. */
  send(request: OutgoingRequest): Promise<OutgoingResult>;
}
