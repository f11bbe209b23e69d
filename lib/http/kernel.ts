import { uuidv7 } from '../ids.js';
import { afterBody, readBody } from './body.js';
import { admitBody, closesConnection, type Traffic } from './traffic.js';
import {
  FRAMING_FIELDS,
  readHead,
  type HttpRequest,
  type HttpResponse,
  type ReplyState,
  type RequestHead,
} from './uws.js';

/**
 * The request kernel: the uWS lifecycle of every HTTP surface, written once. For each request, in
 * this order:
 *
 *   traffic gate → onAborted → head copy → open (the surface's own state: route, client address)
 *   → framing check → in-flight count → capped body with gunzip → body admission → the endpoint's
 *   steps → the surface's renderer → one corked answer → metrics
 *
 * A surface supplies its dialect (how its errors and answers look on the wire) and, per endpoint,
 * which header fields it reads, the body cap and the steps. Nothing else about uWS is left to it:
 * the request object is copied before the first await, every answer is written inside cork and
 * never to an aborted response, a body is read (or dropped) before an answer that closes the
 * connection, and the in-flight count a drain waits for is kept here.
 */

/** One request as every surface sees it, from its head to its answer. */
export interface Exchange {
  readonly res: HttpResponse;
  readonly state: ReplyState;
  readonly head: RequestHead;
  readonly traceId: string;
  readonly started: number;
  /** The answer closes the connection: its framing is in doubt, or a refused body was not read to its end. */
  close: boolean;
}

/** What the kernel refuses itself, for the surface to put in its own words. */
export type Refusal =
  | { kind: 'framing'; message: string }
  | { kind: 'too_large'; message: string; maxBytes: number }
  | { kind: 'bad_encoding'; message: string }
  | { kind: 'busy' };

/** How a surface speaks: its error catalogue and wire shape, and how an answer is written. */
export interface Dialect<X extends Exchange, A> {
  traffic: Traffic;
  /** The surface's error for a refusal of the kernel's; it reaches `render` like any thrown error. */
  refusal(r: Refusal, x: X): unknown;
  /** Anything a step threw → the surface's answer; logs a 5xx with its cause at error level. */
  render(x: X, err: unknown): A;
  /** Writes the answer (the surface's header fields, metrics, audit); `close` ends the connection after it. */
  send(x: X, a: A, close: boolean): void;
  /** An answer that could not be written (a fault of ours, never of the request). */
  lost(x: X, err: unknown): void;
}

/** One endpoint: what it reads of the request, and its steps. */
export interface Endpoint<X extends Exchange, A> {
  /**
   * The header fields the steps read (copied before the request dies; no query string, no client address); all when
   * absent.
   */
  headers?: ReadonlySet<string>;
  /** The request's own state, set on the exchange once its head is copied (the matched route, the client address). */
  open?(x: Exchange): X;
  /** The body cap in bytes; undefined: the endpoint takes no body (a body sent anyway is drained unread). */
  maxBodyBytes(x: X): number | undefined;
  /**
   * A refused body (too large, an unknown encoding, no room) goes to the steps as `refused` instead of
   * being answered at once, so they can answer what comes first for them (the core API authenticates first).
   */
  refusalsToSteps?: boolean;
  steps(x: X, body: Buffer | undefined, refused?: unknown): Promise<A>;
}

/** Methods whose body a route may read; any other's body is left to uWS. */
export const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);

/** The uWS handler of one endpoint. */
export function endpoint<X extends Exchange, A>(d: Dialect<X, A>, e: Endpoint<X, A>) {
  const t = d.traffic;
  const wanted = e.headers && new Set([...e.headers, ...FRAMING_FIELDS]);
  return (res: HttpResponse, req: HttpRequest): void => {
    if (t.closed) {
      res.close();
      return;
    }
    t.lastRequestAt = Date.now();
    const state: ReplyState = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    const head = readHead(req, res, wanted);
    // HEAD is GET without the content: same route, same checks, same header fields.
    state.head = head.method === 'HEAD';
    const base: Exchange = { res, state, head, traceId: uuidv7(), started: performance.now(), close: false };
    const x = e.open ? e.open(base) : (base as X);
    // Neither may throw into the promise chain: a failure to answer is logged, never left unhandled.
    const answer = (a: A) => {
      try {
        const rebalancing = closesConnection(t);
        d.send(x, a, x.close || t.draining || rebalancing);
      } catch (err) {
        d.lost(x, err);
      }
    };
    const fail = (err: unknown) => {
      let a: A;
      try {
        a = d.render(x, err);
      } catch (e) {
        return d.lost(x, e);
      }
      answer(a);
    };
    if (head.framing) {
      x.close = true;
      const err = d.refusal({ kind: 'framing', message: head.framing }, x);
      // The answer closes the connection: the body is read first, or the close would reset it.
      afterBody(res, () => fail(err));
      return;
    }
    const max = e.maxBodyBytes(x);
    t.inflight++;
    if (max === undefined) {
      if (BODY_METHODS.has(head.method)) res.onData(() => {});
      e.steps(x, undefined)
        .then(answer, fail)
        .finally(() => {
          t.inflight--;
        });
      return;
    }
    readBody(
      res,
      head,
      max,
      state,
      (err, body) => {
        let refused: unknown;
        let release: (() => void) | undefined;
        if (err) {
          if (err.close) x.close = true;
          refused = d.refusal(
            err.kind === 'too_large'
              ? { kind: 'too_large', message: err.message, maxBytes: max }
              : { kind: 'bad_encoding', message: err.message },
            x,
          );
        } else {
          release = admitBody(t, body.length);
          if (!release) refused = d.refusal({ kind: 'busy' }, x);
        }
        const steps =
          refused === undefined
            ? e.steps(x, body)
            : e.refusalsToSteps
              ? e.steps(x, undefined, refused)
              : Promise.reject(refused);
        steps.then(answer, fail).finally(() => {
          release?.();
          // Nothing reads the body once the steps are done: its buffer may serve the next request.
          if (t.bodies && body.length) t.bodies.give(body);
          t.inflight--;
        });
      },
      t.bodies,
    );
  };
}
