/**
 * What a function pays from the run's budget (evaluation.ts charge) for
 * the values it reads or makes, so that no expression can make the edge
 * work or allocate past the run's cost limit.
 */
import { caps, charge } from "./evaluation.ts";

/** Cost of making or digesting `length` characters or bytes: one unit per KiB, refused past the run's maxValueBytes. */
export function pay(length: number): void {
  const max = caps().maxValueBytes;
  if (length > max) throw new Error(`a value of more than ${max} bytes`);
  charge(length >> 10);
}

/** Cost of reading or making `count` entries of a list or map: one unit each, as a macro's loop step is. */
export function payEntries(count: number): void {
  charge(count);
}
