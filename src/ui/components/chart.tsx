/**
 * Daily traffic as stacked bars (uPlot on a canvas): "in" at the bottom,
 * "out" on top, one bar per UTC day. Hovering or tapping a day shows its
 * numbers; the same numbers are in a table for those who would rather read.
 */
import "uplot/dist/uPlot.min.css";
import uPlot from "uplot";
import { useEffect, useRef, useState } from "preact/hooks";
import { formatBytes, longDay, shortDay } from "../format.ts";

/** One UTC day's bytes, as both APIs answer them. */
export interface DayTraffic {
  date: string;
  bytes_in: number;
  bytes_out: number;
  total: number;
}

const IN_COLOR = "#f2a541";
const OUT_COLOR = "#1f7a74";
const TEXT_COLOR = "#5b6675";
const GRID_COLOR = "#e7ebf0";
const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

/** Axis steps that land on round binary sizes: 1, 2, 4 ... 512 KB, 1 MB, ... (so never "1000 MB"). */
const BYTE_STEPS = [0, 1, 2, 3, 4, 5].flatMap((p) => [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].map((m) => m * 1024 ** p));
const DAY_STEPS = [1, 2, 3, 5, 7, 10, 14, 30, 60, 90];

export function TrafficChart(props: { days: DayTraffic[]; height?: number; caption: string }) {
  const { days } = props;
  const height = props.height ?? 240;
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const dates = useRef<string[]>([]);
  const [hover, setHover] = useState<number | null>(null);
  dates.current = days.map((d) => d.date);

  const data = (): uPlot.AlignedData => [days.map((_, i) => i), days.map((d) => d.bytes_in + d.bytes_out), days.map((d) => d.bytes_in)];

  useEffect(() => {
    const el = box.current!;
    const bars = uPlot.paths.bars!({ size: [0.72, 30], gap: 1 });
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { show: false },
      cursor: { points: { show: false }, drag: { x: false, y: false }, y: false },
      scales: {
        x: { time: false, range: (_u, min, max) => [min - 0.5, max + 0.5] },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1024] },
      },
      axes: [
        {
          stroke: TEXT_COLOR,
          font: FONT,
          grid: { show: false },
          ticks: { show: false },
          size: 30,
          gap: 4,
          incrs: DAY_STEPS,
          space: 52,
          // the newest day is at the right end; count steps back from it so "today" always has a label
          splits: (_u, _axis, min, max, incr) => {
            const out: number[] = [];
            for (let i = Math.floor(max); i >= Math.ceil(min); i -= incr) out.unshift(i);
            return out;
          },
          values: (_u, splits) => splits.map((i) => (dates.current[i] ? shortDay(dates.current[i]!) : "")),
        },
        {
          stroke: TEXT_COLOR,
          font: FONT,
          size: 72,
          gap: 6,
          space: 34,
          incrs: BYTE_STEPS,
          grid: { stroke: GRID_COLOR, width: 1 },
          ticks: { show: false },
          values: (_u, splits) => splits.map((v) => formatBytes(v)),
        },
      ],
      series: [
        {},
        { label: "Out", fill: OUT_COLOR, stroke: OUT_COLOR, width: 0, paths: bars, points: { show: false } },
        { label: "In", fill: IN_COLOR, stroke: IN_COLOR, width: 0, paths: bars, points: { show: false } },
      ],
      hooks: { setCursor: [(u) => setHover(u.cursor.idx ?? null)] },
    };
    const u = new uPlot(opts, data(), el);
    plot.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [height]);

  useEffect(() => {
    plot.current?.setData(data());
  }, [days]);

  const shown = hover !== null && days[hover] ? days[hover]! : days[days.length - 1];
  const empty = days.every((d) => d.total === 0);
  const total = days.reduce((s, d) => s + d.total, 0);

  return (
    <figure class="chart">
      <figcaption class="chart-caption">
        <span>{props.caption}</span>
        <span class="legend" aria-hidden="true">
          <span class="swatch" style={{ background: IN_COLOR }} /> In
          <span class="swatch" style={{ background: OUT_COLOR }} /> Out
        </span>
      </figcaption>
      <div class="chart-readout" aria-live="off">
        {shown ? (
          <>
            <strong>{longDay(shown.date)}</strong>
            <span>
              <span class="swatch" style={{ background: IN_COLOR }} /> in {formatBytes(shown.bytes_in)}
            </span>
            <span>
              <span class="swatch" style={{ background: OUT_COLOR }} /> out {formatBytes(shown.bytes_out)}
            </span>
            <span class="muted">total {formatBytes(shown.total)}</span>
          </>
        ) : null}
      </div>
      <div class="chart-box" ref={box} aria-hidden="true">
        {empty && <div class="chart-empty">No traffic in these {days.length} days</div>}
      </div>
      <details class="chart-table">
        <summary>
          Show as a table ({formatBytes(total)} over {days.length} days)
        </summary>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Day (UTC)</th>
                <th scope="col" class="num">In</th>
                <th scope="col" class="num">Out</th>
                <th scope="col" class="num">Total</th>
              </tr>
            </thead>
            <tbody>
              {[...days].reverse().map((d) => (
                <tr key={d.date}>
                  <td>{d.date}</td>
                  <td class="num">{formatBytes(d.bytes_in)}</td>
                  <td class="num">{formatBytes(d.bytes_out)}</td>
                  <td class="num">{formatBytes(d.total)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
