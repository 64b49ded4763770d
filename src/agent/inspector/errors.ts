/**
 * The inspector API's refusals: one code, one status, given here once, with
 * what each means and what to do (docs/reference/codes.md is made from this
 * table). A refusal is answered as the admin API answers
 * (`{"error": message}`), with its stable code beside it for scripts
 * (`"code"`).
 */
export const INSPECTOR_ERRORS = {
  BAD_REQUEST: { status: 400, meaning: "The request is not what the inspector's API takes; the message says why.", advice: "Fix what the message names." },
  /** Not the inspector's own Host: a page on another name that resolves here (DNS rebinding). */
  HOST_REFUSED: {
    status: 403,
    meaning: "The Host header does not name the inspector (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT` or `--inspect-addr`): a page on another name that resolves here (DNS rebinding).",
    advice: "Open the inspector at the address the agent printed.",
  },
  /** A write from another site's page. */
  CROSS_SITE: {
    status: 403,
    meaning: "A write (replay, clear) from another site's page, judged by `Sec-Fetch-Site` and `Origin`; a page on another port of localhost is another site.",
    advice: "Use the inspector's own page, or a script such as curl (which sends neither header).",
  },
  NOT_FOUND: {
    status: 404,
    meaning: "No such capture (the oldest go past `--inspect-keep` or `--inspect-memory`), or no such path.",
    advice: "List the captures again.",
  },
  METHOD_NOT_ALLOWED: { status: 405, meaning: "The path does not take this method; `Allow` lists those it does.", advice: "Use a method from `Allow`." },
  /** The capture cannot be sent again as it was (its body was cut, or it is a WebSocket). */
  NOT_REPLAYABLE: {
    status: 409,
    meaning: "The capture cannot be sent again as it was: its body was kept only up to 1 MiB, it is a WebSocket, or the server's traffic policy answered it (it never reached the agent).",
    advice: "Replay it with a body of your own (Edit and replay).",
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    meaning: "A replay's body is over 1 MiB, or its JSON over 2 MiB.",
    advice: "Send a smaller body.",
  },
  /** The agent API: a tunnel of that name runs already. */
  TUNNEL_EXISTS: {
    status: 409,
    meaning: "`POST /api/tunnels` names a tunnel that runs already (from the command line, burrow.yml, the agent API or the server's remote config).",
    advice: "Pick another name, or stop that tunnel first (`DELETE /api/tunnels/NAME`).",
  },
  /** The agent API: the server refused the tunnel. */
  TUNNEL_REFUSED: {
    status: 422,
    meaning: "`POST /api/tunnels`: the server refused the tunnel, as it would at a handshake (its code and message are in `refusal`); the agent's other tunnels go on.",
    advice: "Fix what the server's code names (docs/reference/codes.md).",
  },
  /** The agent API: a tunnel of the server's remote config. */
  MANAGED_BY_SERVER: {
    status: 409,
    meaning: "`DELETE /api/tunnels/NAME` names a tunnel of the server's remote config (`burrow start --remote`), which only the server changes.",
    advice: "Change the device's config on the server (the panel, the portal, or `PUT /api/tokens/ID/config`).",
  },
  /** The agent API: this inspector's tunnels are not the API's to change. */
  NOT_CHANGEABLE: {
    status: 409,
    meaning: "Tunnels are started and stopped through the agent API of the `burrow` agent only; burrow-agent's inspector shows them, its program changes them.",
    advice: "Use the program's own forward() and close().",
  },
  /** The agent API: a change from outside this machine. */
  LOOPBACK_ONLY: {
    status: 403,
    meaning: "Tunnels are started and stopped only through an inspector listening on a loopback address, from a loopback client: the agent API has no authentication, so it is this machine's alone.",
    advice: "Call it on 127.0.0.1 (or localhost) from the same machine; do not move the inspector off loopback (`--inspect-addr`) to change tunnels.",
  },
  /** Too many live streams open at once. */
  TOO_MANY_STREAMS: {
    status: 503,
    meaning: "Too many live streams open at once (32 pages or scripts following the list).",
    advice: "Close other inspector pages.",
  },
} as const;

export type InspectorErrorCode = keyof typeof INSPECTOR_ERRORS;

export class InspectorError extends Error {
  readonly status: number;

  constructor(
    readonly code: InspectorErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    /** More fields of the answer's JSON, beside `error` and `code`. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.status = INSPECTOR_ERRORS[code].status;
  }
}

export const badRequest = (message: string) => new InspectorError("BAD_REQUEST", message);
