/**
 * The edge's periodic and standing work: traffic written down every
 * FLUSH_INTERVAL_MS, quotas enforced every second, and, with ACME, a
 * certificate asked for each name that is reserved or goes live.
 */
import type { Core } from "../core/index.ts";
import { logFailedWrite } from "../db/unavailable.ts";
import { FLUSH_INTERVAL_MS, type TrafficMeter } from "./meter.ts";
import { fullName } from "./public-addresses.ts";
import { enforceQuotas } from "./quota.ts";
import type { Registry } from "./registry.ts";
import type { EdgeEvents } from "./edge-events.ts";

/** Traffic written down, quotas enforced. Returns how to stop it. */
export function startChores(core: Core, registry: Registry, meter: TrafficMeter, events?: EdgeEvents): () => void {
  let checkingQuotas = false;
  const timers = [
    setInterval(() => void meter.flush(), FLUSH_INTERVAL_MS),
    setInterval(() => {
      // one check at a time: a slow database must not pile them up
      if (checkingQuotas) return;
      checkingQuotas = true;
      enforceQuotas(core, registry, meter, events)
        .catch((err) => logFailedWrite("quota check failed", {}, err))
        .finally(() => (checkingQuotas = false));
    }, 1_000),
  ];
  for (const t of timers) t.unref();
  return () => timers.forEach(clearInterval);
}

/** With ACME: a name that is reserved or has a live tunnel (a custom hostname included) gets its own certificate. Returns how to stop. */
export function wantCertificates(want: ((host: string) => void) | undefined, core: Core, domain: string, registry: Registry): (() => void) | undefined {
  if (!want) return undefined;
  registry.onLive = (name) => want(fullName(name, domain));
  // names reserved before this start, then each as it is reserved
  void core.domains.list().then((reserved) => {
    for (const r of reserved) want(`${r.subdomain}.${domain}`);
  });
  return core.domains.onReserve((sub) => want(`${sub}.${domain}`));
}
