/**
 * What tells the two ends of an HTTP/2 connection apart in the parts they
 * share (endpoint.ts, incoming.ts, sender.ts, peer-settings.ts): the
 * server (connection.ts: the edge's end of a visitor's connection) and the
 * client (client-connection.ts: the agent's end of its connection to a
 * service).
 *
 * The client opens every stream, with odd ids (RFC 9113 §5.1.1); neither
 * end pushes, so no even id is ever open on either. The rest of what
 * differs is each end's own file, not a flag here: how a stream comes to be
 * (a client's open(); a server's header block naming a new id,
 * request-blocks.ts), what a header block must hold (a request,
 * request-fields.ts; a response, response-blocks.ts), the bounds (a server
 * holds an untrusted client to budgets and time limits; a client trusts its
 * own service further: limits.ts, client-limits.ts), and how the end is
 * told to whoever uses the connection.
 */
export interface Http2Role {
  /** The other end, as messages name it. */
  readonly peer: "client" | "server";
  /** This end writes the connection preface and opens the streams (the client); else it reads the preface first (the server). */
  readonly opensStreams: boolean;
  /** The largest SETTINGS_ENABLE_PUSH the peer may say: a client 1 (it may take pushes; none are made), a server 0 (RFC 9113 §6.5.2). */
  readonly peerEnablePushMax: number;
  /** Why PUSH_PROMISE from the peer is a PROTOCOL_ERROR: a client may not push; a server may not once this client said push is off. */
  readonly pushRefused: string;
  /**
   * DATA on a stream that is closed, and that this end did not reset lately
   * (whose late frames it expects): a stream error STREAM_CLOSED (RFC 9113
   * §5.1), counted with the peer's resets (the server, facing anyone); or
   * dropped (the client, facing the service it was pointed at).
   */
  readonly refusesLateData: boolean;
}

export const SERVER: Http2Role = {
  peer: "client",
  opensStreams: false,
  peerEnablePushMax: 1,
  pushRefused: "PUSH_PROMISE from a client",
  refusesLateData: true,
};

export const CLIENT: Http2Role = {
  peer: "server",
  opensStreams: true,
  peerEnablePushMax: 0,
  pushRefused: "PUSH_PROMISE though push is off",
  refusesLateData: false,
};
