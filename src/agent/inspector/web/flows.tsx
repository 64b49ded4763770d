/**
 * The udp tunnels' flows, above the requests when the agent has a udp
 * tunnel: each visitor address and port with its datagrams and bytes each
 * way, what was dropped and its age. Read from GET /api/flows every second
 * (flows carry no payloads to capture, so there is no live stream of them).
 */
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, type Flow } from "./api.ts";
import { bytes, duration } from "./format.ts";

const EVERY_MS = 1000;

export function FlowsView() {
  const [flows, setFlows] = useState<Flow[]>([]);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    let stopped = false;
    const load = async () => {
      try {
        const list = await api.flows();
        if (!stopped) {
          setFlows(list);
          setError(undefined);
        }
      } catch (err) {
        if (!stopped) setError(err instanceof ApiError ? err.message : String(err));
      }
    };
    void load();
    const timer = setInterval(load, EVERY_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  const open = flows.filter((f) => f.state === "open").length;
  return (
    <section class="flows" aria-label="UDP flows">
      <h2>
        UDP flows <span class="muted">{open} open</span>
      </h2>
      {error && <p class="error">{error}</p>}
      {flows.length === 0 ? (
        <p class="empty">No flows yet. Send a datagram to a udp tunnel and its flow appears here.</p>
      ) : (
        <table class="requests">
          <thead>
            <tr>
              <th>Tunnel</th>
              <th>Source</th>
              <th>State</th>
              <th class="num">Age</th>
              <th class="num">Datagrams in / out</th>
              <th class="num">Bytes in / out</th>
              <th class="num">Dropped</th>
            </tr>
          </thead>
          <tbody>
            {flows.map((f) => (
              <tr key={`${f.tunnel} ${f.remote} ${f.started_at}`} class="flow-row">
                <td>{f.tunnel}</td>
                <td class="mono">{f.remote}</td>
                <td>
                  {f.state}
                  {f.error && <span class="status s5xx"> {f.error}</span>}
                </td>
                <td class="num">{duration(f.age_ms)}</td>
                <td class="num">
                  {f.datagrams_in} / {f.datagrams_out}
                </td>
                <td class="num">
                  {bytes(f.bytes_in)} / {bytes(f.bytes_out)}
                </td>
                <td class="num">{f.dropped}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
