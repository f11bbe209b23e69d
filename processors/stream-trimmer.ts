import { AckPolicy, RetentionPolicy, type ConsumerInfo, type JetStreamManager, type MsgRequest } from 'nats';
import type { Logger } from '../lib/logger.js';
import { Ticker } from '../lib/ticker.js';

/** The sequence of the first message at or after `fromSeq` that `filter` matches; undefined when none. */
export type NextMatching = (filter: string, fromSeq: number) => Promise<number | undefined>;

/**
 * The highest stream sequence up to which a consumer wants nothing more: every message at or
 * below it that its filter matches is acknowledged (or, for a consumer that does not ack, delivered).
 *
 * Counted from what the consumer itself finished with: its ack floor, or its last delivery when
 * nothing delivered awaits an ack. A consumer with messages pending wants the next one, so the
 * floor stays there. One that reports none pending is not taken at its word: nats-server 2.9
 * counts a filtered consumer's pending messages lazily and reported none for messages stored
 * seconds before, so a purge up to the stream's last sequence removed them undelivered
 * (health/changes lost whole relay polls of health_changed events so while the machine was
 * starved of CPU, also when the count was trusted only as far as the previous trim's last
 * sequence). The next message its filter matches is looked up in the stream's store (`next`),
 * and everything before that one is none of its concern.
 */
export async function consumerFloor(c: ConsumerInfo, lastSeq: number, next: NextMatching): Promise<number> {
  const acked = c.config.ack_policy === AckPolicy.None || c.num_ack_pending === 0;
  const done = acked ? c.delivered.stream_seq : c.ack_floor.stream_seq;
  if (done >= lastSeq) return lastSeq;
  if (c.num_pending > 0) return done;
  const seq = await next(c.config.filter_subject || '>', done + 1);
  return seq === undefined || seq > lastSeq ? lastSeq : seq - 1;
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
  trim(stream: string): Promise<number> {
    return trimAcknowledged(this.jsm, stream);
  }
}

/**
 * Purges, by sequence, the prefix of a limits-retention stream that every consumer on it has
 * finished with (`consumerFloor`); returns how many messages went.
 */
export async function trimAcknowledged(jsm: JetStreamManager, stream: string): Promise<number> {
  const info = await jsm.streams.info(stream);
  if (info.config.retention !== RetentionPolicy.Limits || info.state.messages === 0) return 0;
  const last = info.state.last_seq;
  // STREAM.MSG.GET takes next_by_subj since nats-server 2.9; nats.js types it for direct gets only.
  const next: NextMatching = (filter, fromSeq) =>
    jsm.streams
      .getMessage(stream, {
        next_by_subj: filter,
        seq: Math.max(fromSeq, info.state.first_seq),
      } as unknown as MsgRequest)
      .then(
        (m) => m.seq,
        (err: { code?: string }) => {
          if (err.code === '404') return undefined;
          throw err;
        },
      );
  let floor = last;
  for await (const c of jsm.consumers.list(stream)) {
    floor = Math.min(floor, await consumerFloor(c, last, next));
    if (floor < info.state.first_seq) return 0;
  }
  const res = await jsm.streams.purge(stream, { seq: floor + 1 });
  return res.purged;
}
