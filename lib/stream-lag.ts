import type { ConsumerInfo, JetStreamManager } from 'nats';
import type { Gauge, Registry } from 'prom-client';
import type { Logger } from './logger.js';
import { gauge } from './prometheus.js';
import { Sampler } from './sampler.js';

export interface StreamLagOptions {
  /** Streams whose durable consumers are watched (EVENTS, WEBHOOKS). */
  consumersOf: readonly string[];
  /** Streams whose size is reported (the consumers' streams and the dead-letter stream). */
  sizesOf: readonly string[];
  everyMs: number;
}

/** The first message of a consumer not yet acknowledged, as last looked up. */
interface Oldest {
  seq: number;
  storedAt: number;
}

/**
 * End-to-end freshness of the streams, sampled every `everyMs` (docs/operations.md, "Freshness"):
 * for every durable consumer, the messages it has not acknowledged yet and the age of the oldest of
 * them. A writer acknowledges a message only after its rows are in ClickHouse, so for a writer's
 * consumer that age is the age of the oldest accepted event not yet queryable; pending counts alone
 * cannot tell a backlog draining from a consumer that stopped. Also the size of each stream in
 * `sizesOf` (the dead-letter stream's depth).
 *
 * The oldest unacknowledged message is the first one matching the consumer's filter after its ack
 * floor (everything up to the floor is acknowledged): one message lookup per consumer, and none
 * while the floor has not moved since the last sample (a stalled consumer costs nothing to watch).
 * It runs outside the processors on purpose: a consumer that stopped cannot report that it stopped.
 */
export class StreamLag {
  private readonly loop: Sampler;
  private readonly oldest = new Map<string, Oldest>();
  private readonly unacked: Gauge;
  private readonly age: Gauge;
  private readonly messages: Gauge;
  private readonly bytes: Gauge;

  constructor(
    private readonly jsm: JetStreamManager,
    registry: Registry,
    log: Logger,
    private readonly o: StreamLagOptions,
  ) {
    // `max` across the processes of a supervised tier: one of them samples (lib/prometheus.ts).
    this.unacked = gauge(registry, 'stream_consumer_unacked_messages', ['stream', 'consumer'], {
      help: 'Messages a durable consumer has not acknowledged yet (pending plus delivered and not acknowledged)',
      aggregator: 'max',
    });
    this.age = gauge(registry, 'stream_consumer_oldest_unacked_age_seconds', ['stream', 'consumer'], {
      help:
        "Age of the consumer's oldest message not acknowledged yet (0 when none); for a writer, of the oldest " +
        'accepted event not yet queryable',
      aggregator: 'max',
    });
    this.messages = gauge(registry, 'stream_messages', ['stream'], {
      help: 'Messages stored in the stream',
      aggregator: 'max',
    });
    this.bytes = gauge(registry, 'stream_bytes', ['stream'], { help: 'Bytes stored in the stream', aggregator: 'max' });
    this.loop = new Sampler(() => this.sample(), registry, log, {
      name: 'stream_lag',
      what: 'the streams and their consumers',
      everyMs: o.everyMs,
    });
  }

  start(): void {
    this.loop.start();
  }

  /** One sample of every watched stream and consumer, the gauges set together at the end. */
  async sample(now = Date.now()): Promise<void> {
    const sizes: Array<[string, number, number]> = [];
    for (const stream of this.o.sizesOf) {
      const info = await this.jsm.streams.info(stream);
      sizes.push([stream, info.state.messages, info.state.bytes]);
    }
    const lags: Array<[string, string, number, number]> = [];
    for (const stream of this.o.consumersOf) {
      for await (const c of this.jsm.consumers.list(stream)) {
        const unacked = c.num_pending + c.num_ack_pending;
        const storedAt = unacked > 0 ? await this.oldestStoredAt(stream, c) : now;
        lags.push([stream, c.name, unacked, Math.max(0, (now - storedAt) / 1000)]);
      }
    }
    this.messages.reset();
    this.bytes.reset();
    for (const [stream, n, b] of sizes) {
      this.messages.set({ stream }, n);
      this.bytes.set({ stream }, b);
    }
    this.unacked.reset();
    this.age.reset();
    for (const [stream, consumer, n, s] of lags) {
      this.unacked.set({ stream, consumer }, n);
      this.age.set({ stream, consumer }, s);
    }
  }

  /** When the consumer's first unacknowledged message was stored (ms); looked up only when its floor moved. */
  private async oldestStoredAt(stream: string, c: ConsumerInfo): Promise<number> {
    const key = `${stream}\u0000${c.name}`;
    const seq = c.ack_floor.stream_seq + 1;
    const known = this.oldest.get(key);
    if (known?.seq === seq) return known.storedAt;
    const filter = c.config.filter_subject || '>';
    // nats-server's STREAM.MSG.GET with next_by_subj: the first message at or after seq on the filter.
    const m = await this.jsm.streams
      .getMessage(stream, { seq, next_by_subj: filter } as unknown as { seq: number })
      .catch(() => undefined);
    // Trimmed or gone meanwhile: counted from now, and looked up again at the next sample.
    if (!m) return Date.now();
    const storedAt = m.time.getTime();
    this.oldest.set(key, { seq, storedAt });
    return storedAt;
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
