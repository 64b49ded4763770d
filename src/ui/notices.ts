/**
 * Messages about what an action did: successes fade after a few seconds,
 * errors stay until the person dismisses them.
 */
import { useEffect, useState } from "preact/hooks";

export interface Notice {
  id: number;
  kind: "ok" | "error";
  text: string;
}

let notices: Notice[] = [];
let nextId = 1;
const listeners = new Set<(n: Notice[]) => void>();
const publish = () => listeners.forEach((l) => l(notices));

const OK_VISIBLE_MS = 5000;

export function notify(kind: Notice["kind"], text: string) {
  const notice = { id: nextId++, kind, text };
  notices = [...notices.slice(-4), notice];
  publish();
  if (kind === "ok") setTimeout(() => dismiss(notice.id), OK_VISIBLE_MS);
}

export function dismiss(id: number) {
  notices = notices.filter((n) => n.id !== id);
  publish();
}

export function clearNotices() {
  notices = [];
  publish();
}

export function useNotices(): Notice[] {
  const [list, setList] = useState(notices);
  useEffect(() => {
    listeners.add(setList);
    return () => void listeners.delete(setList);
  }, []);
  return list;
}
