/**
 * A supervised tier in miniature for test/unit/supervise.test.ts: run without SUPERVISED_SLOT it
 * supervises two copies of itself (lib/lifecycle.ts `supervise`); each copy says on stdout when
 * its supervisor asks it to spread its connections again. Copy 0 announces that it listens at once,
 * copy 1 after STAGGER_MS, as a tier's workers do when one starts slower than the other.
 */
import { announceListening, onRebalance, supervise } from '../../lib/lifecycle.js';
import { createLogger } from '../../lib/logger.js';

const slot = process.env.SUPERVISED_SLOT;
if (slot === undefined) {
  supervise(createLogger('supervised', 'warn'), 2, 'SUPERVISED_SLOT', process.env);
} else {
  onRebalance(() => process.stdout.write(`worker ${slot}: rebalance\n`));
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
