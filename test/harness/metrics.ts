/** Reads a Prometheus text exposition, as a scraper would. */

export interface Exposition {
  text: string;
  /** Sample values by series, written as in the text: `name{label="value",...}` or `name`. */
  samples: Map<string, number>;
  /** Every metric name the text declares (# TYPE) or has a sample of. */
  names: Set<string>;
}

export function parseExposition(text: string): Exposition {
  const samples = new Map<string, number>();
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const declared = /^# TYPE (\S+) /.exec(line);
    if (declared) {
      names.add(declared[1]!);
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    names.add(m[1]!);
    samples.set(m[1]! + (m[2] ?? ""), m[3] === "+Inf" ? Infinity : Number(m[3]));
  }
  return { text, samples, names };
}

export async function scrape(adminUrl: string, headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await fetch(`${adminUrl}/metrics`, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${text}`);
  return parseExposition(text);
}

/** A series' value, 0 when it is not there (a counter nothing has counted yet). */
export const sample = (e: Exposition, series: string): number => e.samples.get(series) ?? 0;
