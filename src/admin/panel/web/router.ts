/**
 * Paths in the address bar, without a router library: the server serves the
 * same page on each of them (serve.ts PANEL_PATHS), and history.pushState
 * moves between them without a reload.
 */

export type Page =
  | { name: "dashboard" }
  | { name: "users" }
  | { name: "user"; id: number }
  | { name: "domains" }
  | { name: "tunnels" }
  | { name: "agents" }
  | { name: "certificates" }
  | { name: "audit" }
  | { name: "keys" }
  | { name: "webhooks" }
  | { name: "invitations" }
  | { name: "policies" }
  | { name: "missing" };

export function matchPath(path: string): Page {
  const p = path.replace(/\/+$/, "") || "/";
  if (p === "/") return { name: "dashboard" };
  if (p === "/users") return { name: "users" };
  if (p === "/domains") return { name: "domains" };
  if (p === "/tunnels") return { name: "tunnels" };
  if (p === "/agents") return { name: "agents" };
  if (p === "/certificates") return { name: "certificates" };
  if (p === "/audit") return { name: "audit" };
  if (p === "/keys") return { name: "keys" };
  if (p === "/webhooks") return { name: "webhooks" };
  if (p === "/invitations") return { name: "invitations" };
  if (p === "/policies") return { name: "policies" };
  const user = /^\/users\/([1-9][0-9]{0,15})$/.exec(p);
  if (user) return { name: "user", id: Number(user[1]) };
  return { name: "missing" };
}

export { followLink, navigate, usePath } from "../../../ui/navigation.ts";
