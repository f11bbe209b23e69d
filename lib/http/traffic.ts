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
  /** Answers that still close their connection, so that clients spread over the processes again (`rebalance`). */
  closesOwed: number;
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
    closesOwed: 0,
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
 * The next `closes` answers (by default, as many as requests are in flight) close their
 * connections: keep-alive clients reconnect, and the kernel spreads the new connections over every
 * process listening on the port (SO_REUSEPORT), a restarted one too. The supervisor asks for as
 * many as the process holds connections (lib/lifecycle.ts).
 *
 * A count, not a time: for 2 s after each request, every answer closed its connection. The kernel
 * does not split evenly (about 58/42 over two processes), and a client closed again and again ends
 * where it spends the most time, on the busier process, whose answers come slower: over the
 * window, the clients drifted onto one process (surface B's benchmark: 34/26 before a window,
 * 54/10 after it, for the rest of the run). Closed about once each, they stay where they land.
 */
export function rebalance(t: Traffic, closes = t.inflight): void {
  // Every worker that starts listening asks each worker for one (lib/lifecycle.ts): not added up.
  t.closesOwed = Math.max(t.closesOwed, closes);
}

/**
 * Whether the answer being given closes its connection for a rebalance (`rebalance`). Call it once
 * per answer, whatever else closes the connection: each answer pays one of the closes owed.
 */
export function closesConnection(t: Traffic): boolean {
  if (t.closesOwed === 0) return false;
  t.closesOwed--;
  return true;
}
