/**
 * Paths in the address bar, without a router library: the server serves the
 * same page on each of them (serve.ts PANEL_PATHS), and history.pushState
 * moves between them without a reload.
 */
import { useEffect, useState } from "preact/hooks";

export type Page =
  | { name: "dashboard" }
  | { name: "users" }
  | { name: "user"; id: number }
  | { name: "domains" }
  | { name: "tunnels" }
  | { name: "certificates" }
  | { name: "audit" }
  | { name: "keys" }
  | { name: "missing" };

export function matchPath(path: string): Page {
  const p = path.replace(/\/+$/, "") || "/";
  if (p === "/") return { name: "dashboard" };
  if (p === "/users") return { name: "users" };
  if (p === "/domains") return { name: "domains" };
  if (p === "/tunnels") return { name: "tunnels" };
  if (p === "/certificates") return { name: "certificates" };
  if (p === "/audit") return { name: "audit" };
  if (p === "/keys") return { name: "keys" };
  const user = /^\/users\/([1-9][0-9]{0,15})$/.exec(p);
  if (user) return { name: "user", id: Number(user[1]) };
  return { name: "missing" };
}

const listeners = new Set<() => void>();
const changed = () => listeners.forEach((l) => l());
window.addEventListener("popstate", changed);

export function navigate(to: string, options: { replace?: boolean } = {}) {
  if (to !== location.pathname + location.search) {
    history[options.replace ? "replaceState" : "pushState"](null, "", to);
  }
  changed();
}

/** The current path; re-renders on navigate() and on the browser's back and forward. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return path;
}

/** For an <a href>'s onClick: plain left clicks stay in the page; others (new tab, ...) do what they always do. */
export function followLink(e: MouseEvent) {
  const a = e.currentTarget as HTMLAnchorElement;
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target) return;
  if (a.origin !== location.origin) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
}
