/**
 * Paths in the address bar, without a router library: the server serves the
 * same page on each of a page's paths, and history.pushState moves between
 * them without a reload. Which path is which page is each page's own
 * (its router.ts).
 */
import { useEffect, useState } from "preact/hooks";

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
