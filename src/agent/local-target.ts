/** Where a tunnel's local service is: what the agent connects to for each visitor. */
export interface LocalTarget {
  host: string;
  port: number;
  /** --host-header: undefined keeps the visitor's Host, "rewrite" uses the local address, anything else is used as is. */
  hostHeader?: string;
  /** https to the local service (for a target given as https://host:port). */
  tls?: boolean;
}
