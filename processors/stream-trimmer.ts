import { AckPolicy, RetentionPolicy, type ConsumerInfo, type JetStreamManager } from 'nats';
import type { Logger } from '../lib/logger.js';
import { Ticker } from '../lib/ticker.js';

/**
 * The highest stream sequence up to which a consumer wants nothing more: every message at or
 * below it that its filter matches is acknowledged (or, for a consumer that does not ack, delivered).
 *
 * A consumer that reports nothing pending is done with the whole stream only as far as
 * `settledSeq`, the stream's last sequence one trim earlier: nats-server 2.9 counts a filtered
 * consumer's pending messages lazily, and reported none for messages stored a moment before,
 * which a purge up to the stream's last sequence then removed undelivered (health/changes lost
 * the first 25 health_changed events of a relay's poll so). Its own deliveries stay its floor.
 */
export function consumerFloor(c: ConsumerInfo, lastSeq: number, settledSeq = lastSeq): number {
  const noAcks = c.config.ack_policy === AckPolicy.None;
  const acked = noAcks || c.num_ack_pending === 0;
  if (c.num_pending === 0 && acked) return Math.max(Math.min(lastSeq, settledSeq), c.delivered.stream_seq);
  if (acked) return c.delivered.stream_seq;
  return c.ack_floor.stream_seq;
}

/**
 * Interest retention done from outside the server, for streams kept with limits retention
 * (EVENTS and WEBHOOKS, infra/streams.ts): the prefix of a stream that every consumer on it has
 * acknowledged is purged, so the stream holds what some consumer still wants, as interest
 * retention would, and refuses new messages at its byte cap (discard new) the same way.
 *
 * Why not the server's interest retention: nats-server 2.9 (Debian's) with replicated streams
 * removed messages that a pull consumer had not received yet, while a second consumer on the
 * same subjects acknowledged them: the cluster fault suite lost acknowledged events whenever the
 * writer stopped pulling for 30 s (paused, or waiting out a ZooKeeper outage). Consumer ack floors
 * are what a consumer's leader reports, and a stale one is only lower: purging below the lowest
 * keeps every message some consumer has not finished with.
 *
 * Every processors instance runs it; purging a prefix twice is harmless. A stream still created
 * with interest retention (before this) is left to the server.
 */
export class StreamTrimmer {
  private readonly ticker: Ticker;
  /** Each stream's last sequence at the previous trim (consumerFloor's settledSeq). */
  private readonly settled = new Map<string, number>();

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly streams: string[],
    private readonly log: Logger,
    intervalMs = 4_000,
  ) {
    this.ticker = new Ticker(
      intervalMs,
      async () => {
        for (const s of this.streams) await this.trim(s);
      },
      (err) => this.log.warn({ err: String(err) }, 'stream trim failed; retried'),
    );
  }

  start(): void {
    this.ticker.start(1000);
  }

  stop(): Promise<void> {
    return this.ticker.stop();
  }

  /** Purges the acknowledged prefix of one stream; returns how many messages went. */
  async trim(stream: string): Promise<number> {
    const info = await this.jsm.streams.info(stream);
    if (info.config.retention !== RetentionPolicy.Limits || info.state.messages === 0) return 0;
    const last = info.state.last_seq;
    const settled = this.settled.get(stream) ?? 0;
    this.settled.set(stream, last);
    let floor = last;
    for await (const c of this.jsm.consumers.list(stream)) floor = Math.min(floor, consumerFloor(c, last, settled));
    if (floor < info.state.first_seq) return 0;
    const res = await this.jsm.streams.purge(stream, { seq: floor + 1 });
    return res.purged;
  }
}
