/** Loading from the API, polling it, and a clock for "5 min ago". */
import { useEffect, useRef, useState } from "preact/hooks";
import { messageOf } from "./errors.ts";

export interface Loaded<T> {
  data?: T;
  /** The last load's failure, in words; kept beside data that is still shown. */
  error?: string;
  loading: boolean;
  /** When data last arrived. */
  at?: Date;
  reload(): Promise<void>;
}

/**
 * Calls load() now, again when deps change, and every refreshMs while the tab
 * is visible. A failed refresh keeps the last data and reports its error.
 */
export function useApi<T>(load: () => Promise<T>, deps: unknown[], refreshMs?: number): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean; at?: Date }>({ loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const generation = useRef(0);

  const run = async () => {
    const mine = generation.current;
    try {
      const data = await loadRef.current();
      if (mine === generation.current) setState({ data, loading: false, at: new Date() });
    } catch (err) {
      if (mine === generation.current) setState((s) => ({ ...s, error: messageOf(err), loading: false }));
    }
  };

  useEffect(() => {
    const mine = ++generation.current;
    setState({ loading: true });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      if (!document.hidden) await run();
      if (mine === generation.current && refreshMs) timer = setTimeout(tick, refreshMs);
    };
    void tick();
    return () => {
      generation.current++;
      clearTimeout(timer);
    };
  }, deps);

  return { ...state, reload: run };
}

/** The time now, ticking every `everyMs`, for durations and "ago" texts. */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

/** Sets the tab's title for the page. */
export function useTitle(title: string) {
  useEffect(() => {
    document.title = `${title} · burrow admin`;
  }, [title]);
}
