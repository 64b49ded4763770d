/**
 * What a tunnel kind is, on the protocol's side: one unit per kind in this
 * folder (http.ts, tcp.ts, tls.ts, udp.ts), gathered into the kind table
 * (../kinds.ts), which the rest of the tree asks. The agent's side of a
 * kind is its unit in agent/kinds/, the command line's in cli/kinds/.
 */
import type * as v from "valibot";

/** One kind's facts: what the code branches on. */
export interface KindFacts {
  /** OPEN's `kind` (messages.ts OpenMeta) of a visitor's stream to the agent. */
  readonly stream: "h1" | "tcp" | "tls" | "udp";
  /** A stream's bytes both ways (DATA), or each datagram whole (DATAGRAM frames). */
  readonly carries: "bytes" | "datagrams";
  /** A visitor reaches it by a name (a subdomain or hostname) or by a public port. */
  readonly reachedBy: "name" | "port";
  /** The public ports it takes a port from, when reached by a port: tcp and udp ports are separate spaces. */
  readonly portSpace?: "tcp" | "udp";
  /** It can be private (no public name or port; reached through `burrow connect`). */
  readonly canBePrivate: boolean;
  /** Its access rules: http's (basic auth, OIDC, headers, IP rules), or IP rules only. */
  readonly access: "http" | "ip";
  /** Its `protocol` label in the metrics (tunnels_active). */
  readonly metricsLabel: string;
}

/** Where a tunnel is reached, for writing its address: no socket, no server state. */
export interface AddressParts {
  /** The tunnel's full name (a kind reached by a name), or the server's host (a kind reached by a port). */
  host: string;
  /** The port; none: the scheme's own (a name on 80 or 443), or one the writer does not know. */
  port?: number;
  /** The scheme of the edge's HTTP ("https" behind TLS), for a kind reached on it. */
  web?: "http" | "https";
}

/** How a kind is shown to people: the command line, the agent's screen, the panel. */
export interface KindDisplay {
  /** `burrow --help`'s line for its command: what follows `burrow`, and what the command does. */
  readonly synopsis: string;
  readonly summary: string;
  /** The agent's screen: the heading over what came through when every tunnel is of this kind ("TLS Connections")... */
  readonly heading: string;
  /** ...and what its visitors' traffic is called beside other kinds' ("Requests and Connections"). */
  readonly traffic: string;
  /** Its address is a link a browser opens (the panel, the portal). */
  readonly link: boolean;
  /** What `burrow connect` says to do with the local port of a private tunnel of this kind ("connect to 127.0.0.1:5432"). */
  readonly connectVerb: string;
  /** Its public address as a person writes it, e.g. `udp://tunnels.example.com:20053`. */
  address(at: AddressParts): string;
}

/** One kind's unit. `Name` is its name on the wire (HELLO's `protocol`). */
export interface KindUnit<Name extends string = string> {
  readonly name: Name;
  readonly facts: KindFacts;
  /** Its variant of HELLO's TunnelRequest (messages.ts): an object whose `protocol` is the kind's name. */
  readonly request: v.ObjectSchema<{ readonly protocol: v.LiteralSchema<Name, undefined> } & v.ObjectEntries, undefined>;
  readonly display: KindDisplay;
}

/** ":8443", or nothing for no port. */
export const portSuffix = (port: number | undefined): string => (port === undefined ? "" : `:${port}`);
