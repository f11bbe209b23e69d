import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from '#tap';
import { ClickHouseEndpoints } from '../../lib/clickhouse-endpoints.js';

/** A server that drops the connection of the first `drops` requests without answering, then answers. */
async function flaky(drops: number): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    if (requests <= drops) {
      req.socket.destroy();
      return;
    }
    res.end('1\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

t.test('a read on a connection the server dropped is sent once more on a new one', async (t) => {
  const s = await flaky(1);
  t.teardown(s.close);
  const ch = new ClickHouseEndpoints(s.url);
  const [res, text] = await ch.read('SELECT 1');
  t.equal(res.status, 200);
  t.equal(text, '1\n');
  t.equal(s.requests(), 2, 'the dropped request and its one retry');
});

t.test('twice dropped: the error, and the endpoint set aside', async (t) => {
  const s = await flaky(5);
  t.teardown(s.close);
  const ch = new ClickHouseEndpoints(s.url);
  await t.rejects(ch.read('SELECT 1'));
  t.equal(s.requests(), 2, 'one retry, not more');
});

t.test('a refused connection is not retried on the same endpoint, the next one is tried', async (t) => {
  const s = await flaky(0);
  t.teardown(s.close);
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((r) => closed.close(() => r()));
  const ch = new ClickHouseEndpoints(`http://127.0.0.1:${port},${s.url}`);
  const [res] = await ch.read('SELECT 1');
  t.equal(res.status, 200);
  t.equal(s.requests(), 1);
  t.same(ch.order(), [s.url, `http://127.0.0.1:${port}`], 'the refusing endpoint set aside');
});

t.test('a read past its deadline fails as a timeout, and a slow answer is not set aside as a refusal', async (t) => {
  // The first answer trickles: its head at once, then a byte every 100 ms for 2 s (an idle timeout
  // would never fire). The next is answered at once.
  let requests = 0;
  const server = http.createServer((_req, res) => {
    requests++;
    if (requests > 1) return res.end('2\n');
    res.writeHead(200);
    const drip = setInterval(() => res.write(' '), 100);
    const end = setTimeout(() => res.end('1\n'), 2_000);
    res.on('close', () => {
      clearInterval(drip);
      clearTimeout(end);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const { port } = server.address() as AddressInfo;
  const ch = new ClickHouseEndpoints(`http://127.0.0.1:${port}`);
  const started = Date.now();
  const err = await ch.read('SELECT 1', {}, 300).then(
    () => undefined,
    (e: Error) => e,
  );
  t.equal(err?.name, 'TimeoutError', 'the whole exchange has the deadline, not only each wait for data');
  t.ok(Date.now() - started < 1_500, 'given up at the deadline, not when the body ended');
  t.same(ch.order(), [`http://127.0.0.1:${port}`], 'a timeout is not a connection failure');
  const [res, text] = await ch.read('SELECT 2', {}, 300);
  t.equal(res.status, 200);
  t.equal(text, '2\n', 'the next read is answered');
});
