import type { NatsConnection } from 'nats';

/**
 * nats.js queues each publish's protocol line and payload as separate chunks and, when it flushes,
 * copies them all into one new Uint8Array before writing it to the socket (`DataBuffer.drain`).
 * For the ingest tier that is an allocation and a copy the size of every request's rows, about
 * 70 MB a second at full load. Writing the chunks to the corked socket instead sends them in one
 * `writev` without the copy: 2-14 % less ingest CPU per event (bench/RESULTS.md, 26 Nov).
 *
 * This reaches into nats.js internals (`protocol.flushPending`, `protocol.outbound.buffers`,
 * `protocol.transport.socket`, as of nats 2.29). When they are not shaped as expected the
 * connection is left as it is and `false` returned, so an upgrade can cost the saving, never
 * correctness; test/ingest/nats-frames.test.ts fails when that happens. The original flush
 * still runs whenever the patch has nothing to gain (one chunk) or cannot see a plain socket.
 */
export function writeFramesUncopied(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as { protocol?: Protocol }).protocol;
  if (
    !protocol ||
    typeof protocol.flushPending !== 'function' ||
    !Array.isArray(protocol.outbound?.buffers) ||
    typeof protocol.outbound.reset !== 'function'
  )
    return false;
  const flushCopying = protocol.flushPending;
  protocol.flushPending = function (this: Protocol) {
    const transport = this.transport;
    const socket = transport?.socket;
    const chunks = this.outbound.buffers;
    if (
      !this.infoReceived ||
      !this.connected ||
      chunks.length < 2 ||
      !socket ||
      typeof socket.cork !== 'function' ||
      transport.isClosed ||
      transport.options?.debug
    )
      return flushCopying.call(this);
    const frames = chunks.slice();
    this.outbound.reset();
    socket.cork();
    // Write errors are ignored as nats.js ignores them: the read side or the heartbeat notices.
    for (const f of frames) socket.write(f, ignore);
    socket.uncork();
  };
  return true;
}

const ignore = () => {};

interface Protocol {
  infoReceived: boolean;
  connected: boolean;
  outbound: { buffers: Uint8Array[]; reset(): void };
  transport?: {
    isClosed?: boolean;
    options?: { debug?: boolean };
    socket?: { cork(): void; uncork(): void; write(chunk: Uint8Array, cb: () => void): boolean };
  };
  flushPending(this: Protocol): void;
}
