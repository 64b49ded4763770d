/**
 * stdout for the agent's lines. A busy tunnel logs thousands of requests a
 * second: lines are queued and go out together at most FLUSH_MS after the
 * first of them (or once MAX_PENDING wait), in one write, rather than a
 * console.log (and a system call) each; a person reading them sees no
 * delay, a busy tunnel makes a few writes where it would make thousands.
 * A request's line is queued as its event and the second it came in, and
 * written out as text only then, all of a batch in one go: the request
 * path does no formatting. finish() and a line on stderr write what waits
 * first (flushLines), so nothing is lost at exit and order is kept.
 */
const FLUSH_MS = 10;
/** Lines waiting at most: past it they go at once (memory stays bounded whatever the rate). */
const MAX_PENDING = 4096;

/** Turns a queued event into its line; `stamp` is timestamp() when it was queued. */
export type LineFormat<T> = (event: T, stamp: string) => string;

/** The queue, flat: for each line, its text (format undefined) or its event, format and stamp. */
const items: unknown[] = [];
const formats: (LineFormat<any> | undefined)[] = [];
const stamps: string[] = [];
let timer: ReturnType<typeof setTimeout> | undefined;

function queued(): void {
  if (items.length === 1) timer = setTimeout(flushLines, FLUSH_MS);
  else if (items.length >= MAX_PENDING) flushLines();
}

export function print(line: string): void {
  items.push(line);
  formats.push(undefined);
  stamps.push("");
  queued();
}

/** Queues `event`'s line, made by `format` when the batch is written. */
export function printLater<T>(event: T, format: LineFormat<T>): void {
  items.push(event);
  formats.push(format);
  stamps.push(timestamp());
  queued();
}

/** Writes what is pending now (before a line on stderr, or an exit). */
export function flushLines(): void {
  clearTimeout(timer);
  timer = undefined;
  const n = items.length;
  if (n === 0) return;
  let text = "";
  for (let i = 0; i < n; i++) {
    const format = formats[i];
    text += format === undefined ? (items[i] as string) : format(items[i], stamps[i]!);
    text += "\n";
  }
  items.length = 0;
  formats.length = 0;
  stamps.length = 0;
  process.stdout.write(text);
}

let stampSecond = 0;
let stampText = "";
/** HH:MM:SS local time, formatted once a second (a busy tunnel prints many lines a second). */
export function timestamp(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== stampSecond) {
    stampSecond = second;
    stampText = new Date().toTimeString().slice(0, 8);
  }
  return stampText;
}

const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;
/**
 * Text from visitors (a request's path) as it may reach a terminal: control
 * characters, escape sequences' ESC first, shown as "?" so that no visitor
 * can move the cursor, change colours or retitle the window of the person
 * running the agent.
 */
export function printable(text: string): string {
  CONTROL.lastIndex = 0;
  return CONTROL.test(text) ? text.replace(CONTROL, "?") : text;
}
