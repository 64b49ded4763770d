/**
 * The lists' macros (CEL's list extension, as ngrok documents it): slice,
 * flatten, sort, sortBy, distinct, lists.range: their results and errors
 * as ngrok's docs and cel-go's extension give them, the refusals at load,
 * and the cost bound: a huge range or a loop over one refused at load, a
 * list of the request larger than the estimate ended by the run's budget;
 * and the strings extension's reverse, which ngrok documents beside them.
 */
import { describe, expect, test } from "bun:test";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";
import { errorOf, refusalOf, valueOf } from "./macro-harness.ts";

describe("slice", () => {
  test("ngrok's examples, and cel-go's errors", () => {
    expect(valueOf("[1,2,3,4].slice(1, 3)")).toEqual([2n, 3n]);
    expect(valueOf("[1,2,3,4].slice(2, 4)")).toEqual([3n, 4n]);
    expect(valueOf("[1,2].slice(1, 1)")).toEqual([]);
    expect(errorOf("[1,2].slice(-1, 1)")).toContain("negative indexes not supported");
    expect(errorOf("[1,2].slice(2, 1)")).toContain("start index must be less than or equal to end index");
    expect(errorOf("[1,2].slice(0, 3)")).toContain("list is length 2");
    expect(refusalOf("[1,2].slice('a', 1)").refused).toContain("found no matching overload for 'slice'");
  });
});

describe("flatten", () => {
  test("one level by default, n levels asked, a negative depth an error", () => {
    expect(valueOf("[1,[2,3],[4]].flatten()")).toEqual([1n, 2n, 3n, 4n]);
    expect(valueOf("[1,[2,[3,4]]].flatten()")).toEqual([1n, 2n, [3n, 4n]]);
    expect(valueOf("[1,2,[],[],[3,4]].flatten()")).toEqual([1n, 2n, 3n, 4n]);
    expect(valueOf("[1,[2,[3,[4]]]].flatten(2)")).toEqual([1n, 2n, 3n, [4n]]);
    expect(valueOf("[1,[2]].flatten(0)")).toEqual([1n, [2n]]);
    expect(errorOf("[1,[2,[3,[4]]]].flatten(-1)")).toContain("level must be non-negative");
    expect(refusalOf("'abc'.flatten()").refused).toContain("found no matching overload for 'flatten'");
  });
});

describe("sort", () => {
  test("comparable elements of one type sorted; mixed types an error; lists refused at load", () => {
    expect(valueOf("[3, 2, 1].sort()")).toEqual([1n, 2n, 3n]);
    expect(valueOf('["b", "c", "a"].sort()')).toEqual(["a", "b", "c"]);
    expect(valueOf("[2.5, -1.0].sort()")).toEqual([-1, 2.5]);
    expect(valueOf("[true, false].sort()")).toEqual([false, true]);
    expect(valueOf("[b'b', b'a'].sort()")).toEqual([new Uint8Array([97]), new Uint8Array([98])]);
    expect(valueOf("[duration('2s'), duration('1s')].sort()")).toEqual([{ seconds: 1n, nanos: 0 }, { seconds: 2n, nanos: 0 }]);
    expect(valueOf("[timestamp('2024-01-01T00:00:00Z'), timestamp('2023-01-01T00:00:00Z')].sort()[0] == timestamp('2023-01-01T00:00:00Z')")).toBe(true);
    // code-point order: U+1F600 (a surrogate pair in UTF-16) after U+FFFD
    expect(valueOf("['\\U0001F600', '\\uFFFD'].sort()")).toEqual(["\uFFFD", "\u{1F600}"]);
    expect(valueOf("[].sort()")).toEqual([]);
    expect(errorOf('[1, "b"].sort()')).toContain("list elements must have the same type");
    expect(errorOf("[[1], [2]].map(x, x).sort()")).toContain("list elements must be comparable");
    expect(refusalOf("[[1, 2, 3]].sort()").refused).toContain("sort() needs elements that can be ordered");
  });
});

describe("sortBy", () => {
  test("ngrok's example: sorted by a key, stably; the element type kept", () => {
    expect(valueOf('[{"name": "foo", "score": 0}, {"name": "bar", "score": -10}, {"name": "baz", "score": 1000}].sortBy(e, e.score).map(e, e.name)')).toEqual(["bar", "foo", "baz"]);
    expect(valueOf("[3, 1, 2].sortBy(x, -x)")).toEqual([3n, 2n, 1n]);
    expect(valueOf("['bb', 'a', 'cc', 'd'].sortBy(s, size(s))")).toEqual(["a", "d", "bb", "cc"]);
    expect(valueOf("getReqHeader('x-v').sortBy(v, v)", { request: { headers: [["x-v", "b"], ["x-v", "a"]] } })).toEqual(["a", "b"]);
  });

  test("a key that cannot be ordered: refused at load when known, an error at run time when not; a name as the first argument", () => {
    const known = refusalOf("[1, 2].sortBy(x, [x])");
    expect(known.refused).toContain("sortBy() needs a key that can be ordered");
    expect(known.offset).toBe("[1, 2].sortBy(x, ".length);
    expect(errorOf("[1, 'a'].sortBy(x, x)")).toContain("list elements must have the same type");
    expect(refusalOf("'ab'.sortBy(x, x)").refused).toContain("sortBy() sorts a list");
    expect(refusalOf("[1].sortBy(1, 2)").refused).toContain("undeclared reference to function 'sortBy'");
    expect(refusalOf("[1].sortBy(x, y)").refused).toContain("undeclared reference to 'y'");
  });

  test("its loop pays as a macro's: a sortBy nested in a loop over the request is refused at load past the cap", () => {
    expect(refusalOf("req.headers.all(k, req.headers.all(j, getReqHeader(j).sortBy(v, req.headers.map(h, h).sortBy(w, w).size()).size() > 0))").kind).toBe("complexity");
  });
});

describe("distinct", () => {
  test("ngrok's examples; CEL's equality (1 == 1.0 == 1u), the first kept", () => {
    expect(valueOf("[1, 2, 2, 3, 3, 3].distinct()")).toEqual([1n, 2n, 3n]);
    expect(valueOf('["b", "b", "c", "a", "c"].distinct()')).toEqual(["b", "c", "a"]);
    expect(valueOf('[1, "b", 2, "b"].distinct()')).toEqual([1n, "b", 2n]);
    expect(valueOf("[1, 1.0, 1u, 2.5, 2.5].distinct()")).toEqual([1n, 2.5]);
    expect(valueOf("[[1], [1.0], {'a': 1}, {'a': 1}, b'x', b'x'].distinct()")).toEqual([[1n], { a: 1n }, new Uint8Array([120])]);
  });
});

describe("lists.range", () => {
  test("0 to n-1; nothing for n <= 0; a wrong type refused at load", () => {
    expect(valueOf("lists.range(5)")).toEqual([0n, 1n, 2n, 3n, 4n]);
    expect(valueOf("lists.range(0)")).toEqual([]);
    expect(valueOf("lists.range(-3)")).toEqual([]);
    expect(refusalOf("lists.range('5')").refused).toContain("found no matching overload for 'lists.range'");
  });
});

describe("reverse", () => {
  test("ngrok's examples; by code points, not UTF-16 units", () => {
    expect(valueOf("'gums'.reverse()")).toBe("smug");
    expect(valueOf("'John Smith'.reverse()")).toBe("htimS nhoJ");
    expect(valueOf("'a\\U0001F600b'.reverse()")).toBe("b\u{1F600}a");
    expect(refusalOf("[1].reverse()").refused).toContain("found no matching overload for 'reverse'");
  });
});

describe("the cost bound", () => {
  test("a huge literal range, a loop over a range, a flatten of lists of the request: refused at load by their estimate", () => {
    for (const text of ["lists.range(1000000000).size() > 0", "lists.range(200).all(i, lists.range(200).all(j, i != j || true))", "req.headers.all(k, getReqHeader(k).map(v, req.headers.map(h, getReqHeader(h))).flatten().size() > 0)"]) {
      const [e] = errorsOf(`on_http_request:\n  - expressions: [${JSON.stringify(text)}]\n    actions: [{ type: deny }]\n`);
      expect(e).toMatchObject({ code: "CEL_TOO_COMPLEX" });
      expect(e!.message).toContain("estimated cost");
    }
  });

  test("a range, a sort, a flatten, a distinct of a size only the request tells: ended by the run's budget (500), never a hang", async () => {
    const started = performance.now();
    for (const text of ["lists.range(int(getReqHeader('x-n')[0])).size() > 0", "lists.range(int(getReqHeader('x-n')[0])).sort().size() > 0", "[lists.range(int(getReqHeader('x-n')[0]))].flatten().distinct().size() > 0"]) {
      const p = policyOf(`on_http_request:\n  - expressions: [${JSON.stringify(text)}]\n    actions: [{ type: deny, config: { status_code: 418 } }]\n`);
      expect(answered(await p.run("on_http_request", requestInput({ headers: [["x-n", "20"]] }))) ?.status).toBe(418);
      const out = await p.run("on_http_request", requestInput({ headers: [["x-n", "99999"]] }));
      expect(answered(out)?.status).toBe(500);
      expect(out.problems).toEqual([expect.objectContaining({ code: "COST_EXCEEDED" })]);
      expect(errorOf(text.replace(".size() > 0", ""), { request: { headers: [["x-n", "1000000000"]] } })).toContain("100000 entries");
    }
    expect(performance.now() - started).toBeLessThan(5000);
  });
});
