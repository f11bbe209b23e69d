import t from '#tap';
import { connect } from 'nats';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Invalidations } from '../../lib/credentials/invalidations.js';
import type { Logger } from '../../lib/logger.js';
import { dist, privateNats, waitFor } from '../helpers/stack.js';

// A bus of the file's own: no other file's tiers are members on it.
const nats = await privateNats(t);
const SUBJECT = 'inv.api-keys';
const warnings: unknown[] = [];
const log = { warn: (o: unknown) => warnings.push(o) } as unknown as Logger;
const nc = await connect({ servers: nats.url });
t.teardown(() => nc.close());
const revoker = await new Invalidations(nc, log).start({ watch: true });

/**
 * A member on an event loop of its own (a worker thread) whose handler takes `busyMs` of CPU, as
 * a loaded process would: it stores the time it finished applying into `applied` before it answers.
 */
async function member(busyMs: number): Promise<{ worker: Worker; applied: Float64Array; stop(): Promise<void> }> {
  const applied = new Float64Array(new SharedArrayBuffer(8));
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
    (async () => {
      const { connect } = await import(workerData.nats);
      const { Invalidations } = await import(workerData.module);
      const nc = await connect({ servers: workerData.url });
      const inv = new Invalidations(nc, { warn() {} }).on(workerData.subject, () => {
        const until = Date.now() + workerData.busyMs;
        while (Date.now() < until);
        workerData.applied[0] = Date.now();
      });
      await inv.start({ watch: false });
      parentPort.on('message', async () => {
        inv.stop();
        await nc.drain();
        parentPort.postMessage('stopped');
      });
      parentPort.postMessage('joined');
    })();`,
    {
      eval: true,
      workerData: {
        module: pathToFileURL(dist('lib/credentials/invalidations.js')).href,
        nats: import.meta.resolve('nats'),
        url: nats.url,
        subject: SUBJECT,
        busyMs,
        applied,
      },
    },
  );
  t.teardown(() => worker.terminate());
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    worker,
    applied,
    stop: async () => {
      worker.postMessage('stop');
      await new Promise((resolve) => worker.once('message', resolve));
    },
  };
}

async function known(n: number): Promise<void> {
  await waitFor(`${n} members known`, () => revoker.members(SUBJECT) === n, 5_000, 20);
}

t.test('a revocation is answered only once a busy member has applied it', async (t) => {
  const m = await member(400);
  await known(1);
  const started = Date.now();
  await revoker.publish(SUBJECT, 'key-1');
  const done = Date.now();
  t.ok(m.applied[0] > 0, 'the member applied it before the publish resolved');
  t.ok(m.applied[0] <= done, 'and before, not after');
  t.ok(done - started >= 400, `it waited for the member's 400 ms (${done - started} ms)`);
  t.same(warnings, [], 'no member missed');
  await m.stop();
  await known(0);
});

t.test('a member that left is not waited for', async (t) => {
  const m = await member(0);
  await known(1);
  await m.stop();
  await known(0);
  await revoker.publish(SUBJECT, 'key-2');
  t.same(warnings, [], 'nobody was expected');
});

t.test('a member that vanished without leaving holds a revocation up for 2 s at most', async (t) => {
  const m = await member(0);
  await known(1);
  await m.worker.terminate();
  const started = Date.now();
  await revoker.publish(SUBJECT, 'key-3');
  const took = Date.now() - started;
  t.ok(took >= 1_900 && took < 5_000, `about 2 s (${took} ms)`);
  t.equal(warnings.length, 1, 'the missing member is logged');
  t.match(warnings[0], { subject: SUBJECT, unanswered: [String] });
  warnings.length = 0;
});
