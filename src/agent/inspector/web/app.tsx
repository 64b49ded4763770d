/**
 * The inspector's one page: the live list of captured requests with its
 * filters on the left, the chosen one in detail on the right. The list
 * comes from GET /api/requests and stays current through the live stream.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { api, ApiError, type Summary, type Tunnel } from "./api.ts";
import { DetailView } from "./detail.tsx";
import { FlowsView } from "./flows.tsx";
import { bytes, clock, duration, statusClass, type StatusClass } from "./format.ts";
import "./styles.css";

/** The list shows at most this many rows; the agent keeps its own count (--inspect-keep). */
const SHOWN = 1000;

interface Filters {
  tunnel: string;
  method: string;
  status: StatusClass;
  text: string;
}

const NO_FILTERS: Filters = { tunnel: "", method: "", status: "", text: "" };

export function App() {
  const [rows, setRows] = useState<Summary[]>([]);
  const [tunnels, setTunnels] = useState<Tunnel[]>([]);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [selected, setSelected] = useState<number | undefined>(undefined);
  const [live, setLive] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);

  useEffect(() => {
    let source: EventSource | undefined;
    const upsert = (s: Summary) =>
      setRows((old) => {
        const i = old.findIndex((r) => r.id === s.id);
        if (i >= 0) return old.map((r) => (r.id === s.id ? s : r));
        return [s, ...old].slice(0, SHOWN);
      });
    // the list is read each time the live stream (re)opens: after the agent restarts, or after the
    // stream dropped this page for falling behind, what was missed meanwhile is there again
    const load = async () => {
      try {
        const [list, ts] = await Promise.all([api.list(), api.tunnels()]);
        setRows(list.slice(0, SHOWN));
        setTunnels(ts);
        setError(undefined);
      } catch (err) {
        setError(err instanceof ApiError ? err.message : String(err));
      }
    };
    const start = () => {
      source = new EventSource("/api/requests/stream");
      source.onopen = () => {
        setLive(true);
        void load();
      };
      source.onerror = () => setLive(false);
      const onCapture = (ev: MessageEvent) => upsert(JSON.parse(ev.data) as Summary);
      source.addEventListener("request", onCapture);
      source.addEventListener("update", onCapture);
      source.addEventListener("clear", () => {
        setRows([]);
        setSelected(undefined);
      });
    };
    start();
    return () => source?.close();
  }, []);

  const methods = useMemo(() => [...new Set(rows.map((r) => r.method))].sort(), [rows]);
  const shown = useMemo(() => {
    const text = filters.text.trim().toLowerCase();
    return rows.filter(
      (r) =>
        (!filters.tunnel || r.tunnel === filters.tunnel) &&
        (!filters.method || r.method === filters.method) &&
        (!filters.status || statusClass(r) === filters.status) &&
        (!text || r.path.toLowerCase().includes(text)),
    );
  }, [rows, filters]);

  const set = (patch: Partial<Filters>) => setFilters((f) => ({ ...f, ...patch }));
  const clearAll = async () => {
    try {
      await api.clear();
      setRows([]);
      setSelected(undefined);
    } catch (err) {
      setError(String((err as Error).message));
    }
  };

  return (
    <div class="shell">
      <header class="top">
        <span class="brand">burrow inspector</span>
        <span class="tunnels">
          {tunnels.map((t) => (
            <span class="tunnel" key={t.name} title={`${t.public_url} → ${t.local}`}>
              <b>{t.name}</b> {t.public_url} → {t.local}
              {t.inspect ? "" : " (not captured)"}
            </span>
          ))}
        </span>
        <span class={live ? "live on" : "live"}>{live ? "live" : "reconnecting…"}</span>
      </header>
      {error && <p class="error" role="alert">{error}</p>}
      {tunnels.some((t) => t.protocol === "udp") && <FlowsView />}
      <div class="panes">
        <section class="list">
          <div class="filters">
            <select aria-label="Tunnel" value={filters.tunnel} onChange={(e) => set({ tunnel: e.currentTarget.value })}>
              <option value="">All tunnels</option>
              {tunnels.map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name}
                </option>
              ))}
            </select>
            <select aria-label="Method" value={filters.method} onChange={(e) => set({ method: e.currentTarget.value })}>
              <option value="">All methods</option>
              {methods.map((m) => (
                <option key={m} value={m}>
                  {m}
                </option>
              ))}
            </select>
            <select aria-label="Status" value={filters.status} onChange={(e) => set({ status: e.currentTarget.value as StatusClass })}>
              <option value="">All statuses</option>
              {(["2xx", "3xx", "4xx", "5xx", "1xx", "failed", "pending"] as const).map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
            <input type="search" aria-label="Path contains" placeholder="Path contains…" value={filters.text} onInput={(e) => set({ text: e.currentTarget.value })} />
            <button type="button" class="danger" onClick={clearAll}>
              Clear all
            </button>
          </div>
          <table class="requests">
            <thead>
              <tr>
                <th>Time</th>
                <th>Tunnel</th>
                <th>Method</th>
                <th>Path</th>
                <th>Status</th>
                <th class="num">Duration</th>
                <th class="num">Sizes</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((r) => (
                <tr
                  key={r.id}
                  class={`request-row${r.id === selected ? " selected" : ""}`}
                  data-id={r.id}
                  tabIndex={0}
                  onClick={() => setSelected(r.id)}
                  onKeyDown={(e) => e.key === "Enter" && setSelected(r.id)}
                >
                  <td class="mono">{clock(r.started_at)}</td>
                  <td>{r.tunnel}</td>
                  <td class="mono">{r.method}</td>
                  <td class="mono path" title={r.path}>
                    {r.replay_of !== null && <span class="badge">replay</span>}
                    {r.answered_by === "edge" && (
                      <span class="badge policy" title="answered by the server's traffic policy: it never reached this agent">
                        policy
                      </span>
                    )}
                    {r.kind === "websocket" && <span class="badge">ws</span>}
                    {r.path}
                    {r.route !== null && <span class="badge route" title={`served by the route ${r.route}`}>via {r.route}</span>}
                  </td>
                  <td>
                    <span class={`status s${statusClass(r)}`}>{r.status ?? (r.state === "failed" ? "failed" : "…")}</span>
                  </td>
                  <td class="num">{duration(r.duration_ms)}</td>
                  <td class="num">
                    {r.websocket
                      ? `${r.websocket.messages_from_visitor} → / ${r.websocket.messages_from_service} ← msgs`
                      : `${bytes(r.request_size)} / ${bytes(r.response_size)}`}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {shown.length === 0 && <p class="empty">{rows.length === 0 ? "No requests yet. Send one through a tunnel and it appears here." : "No request matches these filters."}</p>}
        </section>
        <section class="detail">
          {selected === undefined ? (
            <p class="empty">Choose a request to see it in full.</p>
          ) : (
            <DetailView id={selected} key={selected} tunnels={tunnels} summary={rows.find((r) => r.id === selected)} onSelect={setSelected} />
          )}
        </section>
      </div>
    </div>
  );
}
