/**
 * GET /api/server: where the public side of this server is, for the panel's
 * `burrow login --server ...` line and its tunnel links. Read-only, and
 * behind the session like everything else.
 */
import type { Route } from "./context.ts";
import { json } from "../api/http.ts";
import { ServerInfoJson } from "../api/responses.ts";

export interface PublicInfo {
  /** The tunnel domain: tunnels are <name>.<domain>. */
  domain: string;
  /** What an agent's --server takes, e.g. "http://localhost:8080" or "https://tunnels.example.com". */
  edge_url: string;
  /** The host TCP tunnels are reached on, as host:port. */
  tcp_host: string;
}

export function publicInfoRoutes(info: () => PublicInfo | undefined): Route[] {
  return [
    {
      path: "/api/server",
      methods: {
        GET: () => json(info() ?? { domain: "", edge_url: "", tcp_host: "" }),
      },
      docs: {
        GET: { summary: "Where the public side of this server is (for agents' --server and links)", responses: { 200: { description: "The public side", schema: ServerInfoJson } } },
      },
    },
  ];
}
