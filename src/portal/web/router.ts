/** The portal's pages by path; the server serves the same document on each (page.ts PAGE_PATHS). */
export { followLink, navigate, usePath } from "../../ui/navigation.ts";

export type Page = { name: "overview" } | { name: "devices" } | { name: "account" } | { name: "webhooks" } | { name: "device" } | { name: "invite" } | { name: "missing" };

export function matchPath(path: string): Page {
  const p = path.replace(/\/+$/, "") || "/";
  if (p === "/") return { name: "overview" };
  if (p === "/devices") return { name: "devices" };
  if (p === "/account") return { name: "account" };
  if (p === "/webhooks") return { name: "webhooks" };
  if (p === "/device") return { name: "device" };
  if (p === "/invite") return { name: "invite" };
  return { name: "missing" };
}
