import type { BufferPool } from '../buffer-pool.js';

/**
 * A tier's traffic, shared by its request kernel and its main's shutdown. Draining: keep serving,
 * but close each connection after its answer so keep-alive clients reconnect elsewhere. Closed: a
 * dependency is going away; a late request is dropped unanswered (the client sees a reset, knows
 * nothing was acknowledged, retries).
 */
export interface Traffic {
  inflight: number;
  lastRequestAt: number;
  draining: boolean;
  closed: boolean;
  /** Bytes of request bodies being worked on; a request that would pass the budget is turned away. */
  bodyBytes: number;
  maxBodyBytesInFlight: number;
  /**
   * Until when (ms since the epoch) each answer closes its connection, so that clients spread over
   * the processes again (`rebalance`, `rebalancing`).
   */
  rebalanceUntil: number;
  /**
   * Buffers request bodies are read into and handed back to once their steps are done (lib/buffer-pool.ts); none:
   * fresh ones.
   */
  bodies?: BufferPool;
}

export function traffic(maxBodyBytesInFlight = Number.POSITIVE_INFINITY): Traffic {
  return {
    inflight: 0,
    lastRequestAt: 0,
    draining: false,
    closed: false,
    bodyBytes: 0,
    maxBodyBytesInFlight,
    rebalanceUntil: 0,
  };
}

/**
 * Backpressure on memory: a process works on at most `maxBodyBytesInFlight` bytes of bodies at
 * once (parsed, a body takes several times its size). One request is always let through.
 * Returns the release function, or undefined when the caller must answer 503.
 */
export function admitBody(t: Traffic, bytes: number): (() => void) | undefined {
  if (t.bodyBytes > 0 && t.bodyBytes + bytes > t.maxBodyBytesInFlight) return undefined;
  t.bodyBytes += bytes;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    t.bodyBytes -= bytes;
  };
}

/** Waits until requests stop arriving and every one in flight is answered, or the deadline passes. */
export async function drain(t: Traffic, deadline: number): Promise<void> {
  const sleep = () => new Promise((r) => setTimeout(r, 20));
  t.draining = true;
  while ((t.inflight > 0 || Date.now() - t.lastRequestAt < 250) && Date.now() < deadline) await sleep();
  t.closed = true;
  while (t.inflight > 0 && Date.now() < deadline) await sleep();
}

/**
 * For `ms`, every answer closes its connection: keep-alive clients reconnect, and the kernel spreads
 * the new connections over every process listening on the port (SO_REUSEPORT), a restarted one too.
 */
export function rebalance(t: Traffic, ms = 2000): void {
  // Every worker that starts listening asks for one (lib/lifecycle.ts): a later one is not cut
  // short by an earlier one. Read against the clock at each answer, no timer: a timer counts from
  // the event loop's cached time and could end the window before the clock reached its end.
  t.rebalanceUntil = Math.max(t.rebalanceUntil, Date.now() + ms);
}

/** Whether an answer given now closes its connection (`rebalance`). */
export function rebalancing(t: Traffic, now = Date.now()): boolean {
  return now < t.rebalanceUntil;
}
