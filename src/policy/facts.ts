/**
 * The facts the edge gives a policy run: the visitor's connection, the
 * tunnel it reached, the request, the response. The edge fills them from
 * what it has already parsed; nothing here is read from a socket.
 */
export interface ConnectionFacts {
  /** The visitor's canonical address (behind a trusted proxy, the client it names). */
  clientIp: string;
  clientPort: number;
  /** The public port the visitor connected to. */
  serverPort: number;
  /** The address the visitor connected to (its socket's local address), in canonical text; absent where the edge does not know it. */
  readonly serverIp?: string;
  /** When the connection opened, in ms since the epoch. */
  openedAt: number;
  /** Bytes from the visitor, and to it, on this connection so far (`conn.bytes_in`, `conn.bytes_out`); absent: 0. */
  readonly bytesIn?: number;
  readonly bytesOut?: number;
  /** The region of the node the connection came in at (--region); absent or empty: none. */
  readonly serverRegion?: string;
  /** The TLS the edge terminated for it; absent for a plain connection. A tls tunnel's, passed on undecrypted, has only what its hello said (the server name, JA4). */
  readonly tls?: TlsFacts;
}

/** A TLS handshake the edge terminated, as ngrok names its parts. */
export interface TlsFacts {
  /** "1.3", "1.2" (ngrok's form, without "TLSv"). */
  version: string;
  /** The IANA name: "TLS_AES_128_GCM_SHA256". */
  cipherSuite: string;
  /** The server name the ClientHello asked for; empty when it named none. */
  sni: string;
  /** The protocol ALPN agreed on ("h2", "http/1.1"); empty when the visitor offered none the edge speaks. */
  negotiatedAlpn: string;
  /** The visitor resumed an earlier session (a TLS session ticket) rather than making a full handshake. */
  sessionResumed: boolean;
  /** The JA4 fingerprint of the visitor's ClientHello (tls/ja4.ts); absent where the edge did not read the hello. */
  readonly ja4?: string;
}

export interface EndpointFacts {
  host: string;
  port: number;
  protocol: "http" | "https" | "tcp" | "tls";
  url: string;
}

export interface TunnelFacts {
  /** The tunnel's id: the same for its whole life. */
  id?: string;
  name: string;
  kind: string;
  /** The owner's username. */
  user: string;
}

export type HeaderPairs = readonly (readonly [string, string])[];

export interface RequestFacts {
  method: string;
  /** The origin-form target as the edge judged it: the path in its normal form, and the query. */
  target: string;
  /** The target as the visitor sent it, when it differs. */
  rawTarget?: string;
  scheme: "http" | "https";
  /** The Host header (host, and port when it names one). */
  host: string;
  /** "HTTP/1.1", as ngrok writes it */
  version?: string;
  headers: HeaderPairs;
  /** The body's content, when an action that reads it (verify-webhook) may run: at most the edge's limit (--policy-body-limit). */
  body?: Uint8Array;
  /** The body is larger than the edge reads for the actions (this many bytes): it was not handed over. */
  bodyLimit?: number;
  /** When the head was read, in ms since the epoch. */
  receivedAt?: number;
}

export interface ResponseFacts {
  status: number;
  headers: HeaderPairs;
}

/** Everything one run is given. */
export interface PolicyInput {
  conn: ConnectionFacts;
  endpoint: EndpointFacts;
  tunnel: TunnelFacts;
  /** on_http_request and on_http_response. */
  request?: RequestFacts;
  /** on_http_response. */
  response?: ResponseFacts;
  /** Who an earlier layer's authentication let in. */
  identity?: string;
  /** ms since the epoch; default Date.now(). */
  now?: number;
  /**
   * A visit let through before (an open connection, a WebSocket's pipe),
   * judged again because the policies changed: the actions answer no one
   * and take nothing the visitor paid already (a rate limit passes
   * uncounted, a sign-in is checked, never asked for).
   */
  rejudging?: boolean;
}
