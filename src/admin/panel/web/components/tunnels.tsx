/**
 * Live tunnels as a table: public address (a link for http), user, device,
 * how long it has been up, and bytes each way with the rate since the last
 * poll. Device names come from the owner's token list (the active-tunnel
 * records carry only token_id).
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, messageOf, type ActiveTunnel } from "../api.ts";
import { duration, formatBytes, publicAddress, utcDateTime } from "../../../../ui/format.ts";
import { useNow } from "../../../../ui/hooks.ts";
import { useSession } from "../session.ts";
import { Empty, Link } from "../../../../ui/components/ui.tsx";

const deviceNames = new Map<number, string>();
/** Token ids already looked up without success: asked once, not on every poll. */
const unknownTokens = new Set<number>();

export const tunnelKey = (t: ActiveTunnel) => `${t.protocol}:${t.private?.target ?? t.subdomain ?? t.hostname ?? t.port}:${t.token_id}:${t.connected_at}`;

/** token_id -> device_name for these tunnels, fetching the owners' token lists it lacks. */
export function useDeviceNames(tunnels: ActiveTunnel[]): { names: Map<number, string>; error?: string } {
  const [, setVersion] = useState(0);
  const [error, setError] = useState<string>();
  const inFlight = useRef(new Set<number>());
  useEffect(() => {
    const owners = new Set(
      tunnels.filter((t) => !deviceNames.has(t.token_id) && !unknownTokens.has(t.token_id)).map((t) => t.user_id),
    );
    for (const userId of owners) {
      if (inFlight.current.has(userId)) continue;
      inFlight.current.add(userId);
      api
        .tokens(userId)
        .then((tokens) => {
          for (const token of tokens) deviceNames.set(token.id, token.device_name);
          for (const t of tunnels) if (t.user_id === userId && !deviceNames.has(t.token_id)) unknownTokens.add(t.token_id);
          setError(undefined);
          setVersion((v) => v + 1);
        })
        .catch((err) => setError(`Could not load device names: ${messageOf(err)}`))
        .finally(() => inFlight.current.delete(userId));
    }
  }, [tunnels]);
  return { names: deviceNames, error };
}

interface Sample {
  at: number;
  bytesIn: number;
  bytesOut: number;
  rateIn: number;
  rateOut: number;
}

/** Bytes per second between two polls, per tunnel. */
function useRates(tunnels: ActiveTunnel[], sampledAt: number | undefined): Map<string, Sample> {
  const samples = useRef(new Map<string, Sample>());
  if (sampledAt === undefined) return samples.current;
  const next = new Map<string, Sample>();
  for (const t of tunnels) {
    const key = tunnelKey(t);
    const before = samples.current.get(key);
    if (before && before.at === sampledAt) {
      next.set(key, before);
      continue;
    }
    const seconds = before ? (sampledAt - before.at) / 1000 : 0;
    next.set(key, {
      at: sampledAt,
      bytesIn: t.bytes_in,
      bytesOut: t.bytes_out,
      rateIn: before && seconds > 0 ? Math.max(0, (t.bytes_in - before.bytesIn) / seconds) : 0,
      rateOut: before && seconds > 0 ? Math.max(0, (t.bytes_out - before.bytesOut) / seconds) : 0,
    });
  }
  samples.current = next;
  return next;
}

export function TunnelTable(props: { tunnels: ActiveTunnel[]; showUser?: boolean; sampledAt?: Date; empty?: string }) {
  const { server } = useSession();
  const now = useNow(1000);
  const { names, error } = useDeviceNames(props.tunnels);
  const rates = useRates(props.tunnels, props.sampledAt?.getTime());

  if (props.tunnels.length === 0) return <Empty>{props.empty ?? "No tunnels are open right now."}</Empty>;
  return (
    <>
      {error && (
        <p class="stale" role="alert">
          {error}
        </p>
      )}
      <div class="table-wrap">
        <table class="cards-on-phone tunnels">
          <thead>
            <tr>
              <th scope="col">Public address</th>
              {props.showUser && <th scope="col">User</th>}
              <th scope="col">Device</th>
              <th scope="col">Connected</th>
              <th scope="col" class="num">
                In <span class="muted">(to service)</span>
              </th>
              <th scope="col" class="num">
                Out <span class="muted">(to visitors)</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {props.tunnels.map((t) => {
              const address = publicAddress(server, t);
              const rate = rates.get(tunnelKey(t));
              return (
                <tr key={tunnelKey(t)} data-tunnel={t.private?.target ?? t.subdomain ?? t.hostname ?? String(t.port)}>
                  <td data-label="Address" class="address">
                    <span class={`proto ${t.protocol}`}>{t.protocol}</span>{" "}
                    {address.href ? (
                      <a href={address.href} target="_blank" rel="noopener noreferrer">
                        {address.text}
                      </a>
                    ) : (
                      <code>{address.text}</code>
                    )}
                    {t.private && (
                      <span class="muted small block" data-private={t.private.target}>
                        {t.private.shares.length > 0 ? `shared with ${t.private.shares.join(", ")}` : "not shared"} · {t.private.connected} connected
                      </span>
                    )}
                    {t.pool && (
                      <span class="muted small block" data-pool={t.in_rotation ? "in" : "out"}>
                        pool member{t.in_rotation ? "" : ", out of rotation"}
                      </span>
                    )}
                  </td>
                  {props.showUser && (
                    <td data-label="User">
                      <Link href={`/users/${t.user_id}`}>{t.username}</Link>
                    </td>
                  )}
                  <td data-label="Device" class="device">
                    {names.get(t.token_id) ?? <span class="muted">token #{t.token_id}</span>}
                  </td>
                  <td data-label="Connected" title={`since ${utcDateTime(t.connected_at)}`}>
                    <div>
                      {duration(t.connected_at, now)}
                      <span class="muted small block">since {utcDateTime(t.connected_at)}</span>
                    </div>
                  </td>
                  <td data-label="In" class="num bytes-in" data-bytes={t.bytes_in}>
                    <div>
                      {formatBytes(t.bytes_in)}
                      {rate && rate.rateIn > 0 && <span class="rate block">{formatBytes(rate.rateIn)}/s</span>}
                    </div>
                  </td>
                  <td data-label="Out" class="num bytes-out" data-bytes={t.bytes_out}>
                    <div>
                      {formatBytes(t.bytes_out)}
                      {rate && rate.rateOut > 0 && <span class="rate block">{formatBytes(rate.rateOut)}/s</span>}
                    </div>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </>
  );
}
