/** Medians, ratios, targets and the markdown table. */

export type PathName = "direct" | "burrow" | "ssh";
export const PATHS: PathName[] = ["direct", "burrow", "ssh"];
export const PATH_TITLES: Record<PathName, string> = { direct: "direct", burrow: "burrow", ssh: "ssh -R" };

export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function ratio(a: number, b: number): number {
  return Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? a / b : NaN;
}

/** One figure per run and path, from the runs' results. */
export function runsOf<T>(src: Partial<Record<PathName, T[]>>, f: (x: T) => number): Partial<Record<PathName, number[]>> {
  return Object.fromEntries(Object.entries(src).map(([p, xs]) => [p, (xs as T[]).map(f)])) as Partial<Record<PathName, number[]>>;
}

export function pushRun<T>(into: Partial<Record<PathName, T[]>>, path: PathName, value: T): void {
  (into[path] ??= []).push(value);
}

export interface Row {
  scenario: string;
  unit: string;
  /** Runs per path; paths left out are not measured for this scenario. */
  runs: Partial<Record<PathName, number[]>>;
  /** Higher is better (throughput) or lower (latency, memory). */
  higherIsBetter: boolean;
  note?: string;
  /** Override the burrow cell (e.g. memory rows with their own wording). */
  burrowText?: string;
  ratioText?: { direct?: string; ssh?: string };
  /** A mark after some runs' values (e.g. "✗" for a transfer that lost bytes). */
  marks?: Partial<Record<PathName, string[]>>;
}

export interface Target {
  name: string;
  want: string;
  measured: string;
  pass: boolean | null; // null: not measured
}

export function fmt(x: number, unit = ""): string {
  if (!Number.isFinite(x)) return "–";
  if (unit === "req/s") return x >= 10_000 ? `${(x / 1000).toFixed(1)}k` : x >= 1000 ? `${(x / 1000).toFixed(2)}k` : x.toFixed(0);
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString("en-US");
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

export const fmtRatio = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : "–");

function cell(runs: number[] | undefined, unit: string, marks: string[] = []): string {
  if (!runs || runs.length === 0) return "–";
  return `${runs.map((r, i) => fmt(r, unit) + (marks[i] ?? "")).join(" · ")} → **${fmt(median(runs), unit)}**`;
}

export function table(rows: Row[]): string {
  const out = [
    "| scenario | unit | direct (runs → median) | burrow (runs → median) | ssh -R aes128-gcm (runs → median) | burrow/direct | burrow/ssh |",
    "|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    const m = (p: PathName) => median(r.runs[p] ?? []);
    const rd = r.ratioText?.direct ?? fmtRatio(ratio(m("burrow"), m("direct")));
    const rs = r.ratioText?.ssh ?? fmtRatio(ratio(m("burrow"), m("ssh")));
    out.push(
      `| ${r.scenario}${r.note ? ` ${r.note}` : ""} | ${r.unit} | ${cell(r.runs.direct, r.unit, r.marks?.direct)} | ${r.burrowText ?? cell(r.runs.burrow, r.unit, r.marks?.burrow)} | ${cell(r.runs.ssh, r.unit, r.marks?.ssh)} | ${rd} | ${rs} |`,
    );
  }
  return out.join("\n");
}

export function targetTable(targets: Target[]): string {
  const out = ["| target | wanted | measured | result |", "|---|---|---|---|"];
  for (const t of targets) out.push(`| ${t.name} | ${t.want} | ${t.measured} | ${t.pass === null ? "not run" : t.pass ? "PASS" : "**FAIL**"} |`);
  return out.join("\n");
}
