/**
 * The TXT values of pending DNS-01 challenges, which the DNS responder
 * serves. The ACME client adds a value before it asks the CA to validate and
 * removes it once the challenge is settled; every value also expires on its
 * own after `ttlMs`, so that a client which crashed or forgot cannot leave a
 * value served for ever. Expired values are dropped as they are met (on any
 * read or write): no timers.
 */
import { MAX_TXT_VALUE_BYTES, MAX_TXT_VALUES } from "./wire.ts";
import { isHostName, normalizeName } from "./names.ts";

/** What the responder reads: a normalized name (lower case, no trailing dot) -> its TXT values. */
export interface TxtRecords {
  txt(name: string): readonly string[];
}

/**
 * A value is held this long at most. Validation takes seconds once the CA
 * is asked; an order's challenges are all settled well within this.
 */
export const CHALLENGE_TTL_MS = 10 * 60 * 1000;
/** Names held at once, at most: one per certificate being ordered, in practice one. */
export const MAX_CHALLENGE_NAMES = 16;

/** Printable ASCII without space: base64url and anything else a CA could ask for. */
const VALUE = /^[\x21-\x7e]+$/;

export const ChallengeRefusalCode = {
  BAD_NAME: "BAD_NAME",
  BAD_VALUE: "BAD_VALUE",
  TOO_MANY_VALUES: "TOO_MANY_VALUES",
  TOO_MANY_NAMES: "TOO_MANY_NAMES",
} as const;

export interface ChallengeRefusal {
  code: keyof typeof ChallengeRefusalCode;
  message: string;
}

export class ChallengeRecords implements TxtRecords {
  /** name -> value -> when it expires (ms since the epoch); values in the order they were added. */
  private readonly names = new Map<string, Map<string, number>>();

  constructor(
    private readonly ttlMs: number = CHALLENGE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Serves `value` as a TXT record of `name` until removed or `ttlMs` from
   * now; adding a value held already only restarts its time. Returns why
   * not, or undefined when it is held.
   */
  add(name: string, value: string): ChallengeRefusal | undefined {
    const key = normalizeName(name);
    if (!isHostName(key)) return { code: "BAD_NAME", message: `not a DNS name: ${JSON.stringify(name)}` };
    if (!VALUE.test(value) || value.length > MAX_TXT_VALUE_BYTES) {
      return { code: "BAD_VALUE", message: `a TXT value is 1 to ${MAX_TXT_VALUE_BYTES} printable ASCII characters` };
    }
    const values = this.current(key) ?? new Map<string, number>();
    if (!values.has(value) && values.size >= MAX_TXT_VALUES) {
      return { code: "TOO_MANY_VALUES", message: `${key} holds ${MAX_TXT_VALUES} values already` };
    }
    if (values.size === 0 && this.pruneAll() >= MAX_CHALLENGE_NAMES) {
      return { code: "TOO_MANY_NAMES", message: `${MAX_CHALLENGE_NAMES} names hold values already` };
    }
    values.set(value, this.now() + this.ttlMs);
    this.names.set(key, values);
    return undefined;
  }

  /** Stops serving `value` under `name`; false when it was not held (or had expired). */
  remove(name: string, value: string): boolean {
    const key = normalizeName(name);
    const values = this.current(key);
    if (!values?.delete(value)) return false;
    if (values.size === 0) this.names.delete(key);
    return true;
  }

  /** The values held for `name`, oldest first. */
  txt(name: string): string[] {
    return [...(this.current(normalizeName(name))?.keys() ?? [])];
  }

  /** Values held now, under all names. */
  get size(): number {
    this.pruneAll();
    let n = 0;
    for (const values of this.names.values()) n += values.size;
    return n;
  }

  /** The name's unexpired values (expired ones dropped), or undefined when none are left. */
  private current(key: string): Map<string, number> | undefined {
    const values = this.names.get(key);
    if (!values) return undefined;
    const t = this.now();
    for (const [value, expires] of values) if (expires <= t) values.delete(value);
    if (values.size > 0) return values;
    this.names.delete(key);
    return undefined;
  }

  /** Drops every expired value; returns how many names are left. */
  private pruneAll(): number {
    for (const key of [...this.names.keys()]) this.current(key);
    return this.names.size;
  }
}
