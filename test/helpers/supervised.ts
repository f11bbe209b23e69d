/**
 * A supervised tier in miniature for test/unit/supervise.test.ts: run without SUPERVISED_SLOT it
 * supervises two copies of itself (lib/lifecycle.ts `supervise`); each copy says on stdout when
 * its supervisor asks it to spread its connections again. Copy 0 announces that it listens at once,
 * copy 1 after STAGGER_MS, as a tier's workers do when one starts slower than the other. With
 * BALANCE_EVERY_MS the supervisor evens out their load at that period, and copy BUSY_SLOT keeps
 * its CPU nine tenths busy.
 */
import { announceListening, onRebalance, supervise } from '../../lib/lifecycle.js';
import { createLogger } from '../../lib/logger.js';

const slot = process.env.SUPERVISED_SLOT;
if (slot === undefined) {
  const everyMs = Number(process.env.BALANCE_EVERY_MS ?? 0);
  // A low share of a core: the busy copy gets what a loaded machine leaves it.
  const balance = everyMs ? { everyMs, minShare: 0.2 } : undefined;
  supervise(createLogger('supervised', 'warn'), 2, 'SUPERVISED_SLOT', process.env, [], balance);
} else {
  onRebalance((_, m) => process.stdout.write(`worker ${slot}: rebalance${m.load ? ' (load)' : ''}\n`));
  if (slot === process.env.BUSY_SLOT)
    setInterval(() => {
      const until = Date.now() + 45;
      while (Date.now() < until);
    }, 50);
  setTimeout(
    () => {
      announceListening();
      process.stdout.write(`worker ${slot}: listening\n`);
    },
    slot === '0' ? 0 : Number(process.env.STAGGER_MS ?? 300),
  );
  // Alive until the supervisor stops it.
  setInterval(() => {}, 60_000);
}
