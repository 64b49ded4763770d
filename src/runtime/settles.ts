/**
 * Promise.withResolvers, which Node.js has from 22 only: the agent's code
 * runs on Node.js 20 too (the npm package), so it takes this instead.
 */
export function settles<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (err: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}
