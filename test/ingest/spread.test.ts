import t from '#tap';
import { Http1Connection, requestBuffer } from '../../bench/http1.js';
import { connectionsPerProcess, processesListening } from '../../bench/proc-stats.js';
import { startTier } from '../helpers/stack.js';
import { USAGE } from './support.js';

// A tier of several processes answers /readyz from its first worker before the others listen.
// Keep-alive clients that connect at once (a producer's pool, a load balancer's) all land on that
// worker, and stayed there: surface B's benchmark ran at half its rate with 64 of 64 connections on
// one of two processes. When a worker starts listening every worker hands its connections back to
// the kernel for a moment (lib/lifecycle.ts), which spreads them over all.
t.test('keep-alive connections made as the tier becomes ready end up spread over its processes', async (t) => {
  const ingest = await startTier(t, 'ingest', { INGEST_PROCESSES: '2' });
  const { hostname } = new URL(ingest.url);
  const port = ingest.port;
  // Unauthenticated: answered 401 at once, through the same answer path as every request.
  const request = requestBuffer(hostname, port, USAGE, { 'Content-Type': 'application/json' }, '{}');
  // On until both workers listen, then for at least 4 s (the spread lasts 2) and on until both hold
  // a fair share of the lanes' connections (at least 4 of 32 each: a uniform spread falls below
  // that once in 400,000 times); 90 s at most (a machine busy with the suite starts the second
  // worker late: it must be waited for, not failed).
  let split: number[] = [];
  const spread = () => split.length === 2 && Math.min(...split) >= 4;
  const started = Date.now();
  let bothListen = 0;
  const look = setInterval(() => {
    split = connectionsPerProcess(ingest.proc.pid!, port);
    if (!bothListen && processesListening(ingest.proc.pid!, port) === 2) bothListen = Date.now();
  }, 250);
  const done = () => Date.now() - started > 90_000 || (bothListen > 0 && Date.now() - bothListen > 4000 && spread());
  const statuses = new Map<number, number>();
  const lanes = Array.from({ length: 32 }, () => new Http1Connection(hostname, port));
  await Promise.all(
    lanes.map(
      (c) =>
        new Promise<void>((resolve, reject) => {
          const next = () => {
            if (done()) return resolve();
            c.send(request, (err, status) => {
              if (err) return reject(err);
              statuses.set(status, (statuses.get(status) ?? 0) + 1);
              next();
            });
          };
          next();
        }),
    ),
  );
  clearInterval(look);
  t.same([...statuses.keys()], [401], 'every request answered');
  // Each lane now holds one open connection: how the kernel placed them over the two workers.
  split = connectionsPerProcess(ingest.proc.pid!, port);
  for (const c of lanes) c.close();
  // The 32 lanes, and the keep-alive connection the helper polled /readyz on.
  t.ok(split.reduce((a, b) => a + b, 0) >= 32, `the lanes' connections held by the tier's workers: ${split.join('/')}`);
  t.ok(
    bothListen,
    `both workers listen (the second ${((bothListen - started) / 1000).toFixed(1)} s after the lanes began)`,
  );
  t.ok(spread(), `both workers hold a fair share of them: ${split.join('/')}`);
  if (!bothListen || !spread()) t.comment(`the tier said:\n${ingest.output()}`);
});
