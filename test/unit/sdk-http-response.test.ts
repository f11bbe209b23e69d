import t from '#tap';
import { type HttpParseError, type Response, ResponseParser } from '../../sdk/src/http-response.js';

/** The producer client's reader of HTTP/1.x answers, on bytes cut every way TCP may cut them. */

/** Feeds `pieces` in turn; the answer (and at which piece it completed) or the error. */
function feed(pieces: Buffer[], ended = false): { answer?: Response; at?: number; error?: HttpParseError } {
  const p = new ResponseParser();
  try {
    for (let i = 0; i < pieces.length; i++) {
      const answer = p.push(pieces[i]);
      if (answer !== undefined) return { answer, at: i };
    }
    return ended ? { answer: p.end(), at: pieces.length } : {};
  } catch (err) {
    return { error: err as HttpParseError };
  }
}

/** Every way of cutting `text` in two, and one byte at a time. */
function cuts(text: string): Buffer[][] {
  const b = Buffer.from(text, 'latin1');
  const out: Buffer[][] = [];
  for (let i = 1; i < b.length; i++) out.push([b.subarray(0, i), b.subarray(i)]);
  out.push([...b].map((x) => Buffer.from([x])));
  return out;
}

const LENGTH =
  'HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 28\r\n' +
  'Keep-Alive: timeout=5\r\n\r\n{"accepted":100,"errors":[]}';
const CHUNKED =
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n' +
  '5;name=value\r\n{"acc\r\n17\r\nepted":1,"errors":[]}é\r\n0\r\nX-Trailer: 1\r\n\r\n';

t.test('an answer framed by Content-Length, whole or cut anywhere', async (t) => {
  for (const pieces of [[Buffer.from(LENGTH)], ...cuts(LENGTH)]) {
    const { answer, at, error } = feed(pieces);
    t.equal(error, undefined);
    t.equal(at, pieces.length - 1, 'complete with its last byte, not before');
    t.same(answer, {
      status: 202,
      headers: { 'content-type': 'application/json', 'content-length': '28', 'keep-alive': 'timeout=5' },
      body: '{"accepted":100,"errors":[]}',
      keepAlive: true,
      excess: false,
    });
  }
});

t.test('a chunked answer with extensions, UTF-8 across chunks and trailers, cut anywhere', async (t) => {
  const text = Buffer.from(CHUNKED, 'utf8').toString('latin1');
  for (const pieces of cuts(text)) {
    const { answer, at, error } = feed(pieces);
    t.equal(error, undefined);
    t.equal(at, pieces.length - 1);
    t.equal(answer?.status, 200);
    t.equal(answer?.headers['retry-after'], '3');
    t.equal(answer?.body, '{"accepted":1,"errors":[]}é');
    t.equal(answer?.keepAlive, true);
  }
});

t.test('interim answers are skipped; bare LF line ends are read', async (t) => {
  const { answer } = feed([
    Buffer.from('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n'),
    Buffer.from('HTTP/1.1 429 Too Many Requests\nRetry-After: 2\nContent-Length: 2\n\n{}'),
  ]);
  t.equal(answer?.status, 429);
  t.same(answer?.headers, { 'retry-after': '2', 'content-length': '2' });
  t.equal(answer?.body, '{}');
});

t.test('when the connection may carry the next request', async (t) => {
  const keep = (head: string) => feed([Buffer.from(`${head}\r\nContent-Length: 0\r\n\r\n`)]).answer?.keepAlive;
  t.equal(keep('HTTP/1.1 200 OK'), true);
  t.equal(keep('HTTP/1.1 200 OK\r\nConnection: close'), false);
  t.equal(keep('HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close'), false);
  t.equal(keep('HTTP/1.0 200 OK'), false, 'HTTP/1.0 closes unless it says otherwise');
  t.equal(keep('HTTP/1.0 200 OK\r\nConnection: keep-alive'), true);
  const both = feed([
    Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
  ]);
  t.match(
    both.answer,
    { body: '', keepAlive: false },
    'both framings: chunked wins, the connection is not trusted further',
  );

  const excess = feed([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1')]).answer;
  t.match(excess, { body: '{}', excess: true, keepAlive: false }, 'bytes past the answer');

  const empty = feed([Buffer.from('HTTP/1.1 204 No Content\r\n\r\n')]).answer;
  t.match(empty, { status: 204, body: '', keepAlive: true }, '204 has no body');
});

t.test('a body framed by the end of the connection', async (t) => {
  const text = 'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n{"title":"busy"}';
  for (const pieces of cuts(text)) {
    const { answer, at } = feed(pieces, true);
    t.equal(at, pieces.length, 'complete only when the connection ends');
    t.match(answer, { status: 503, body: '{"title":"busy"}', keepAlive: false });
  }
});

t.test('what cannot be framed for certain is an error', async (t) => {
  const code = (text: string, ended = false) => feed([Buffer.from(text)], ended).error?.code;
  t.equal(code('SSH-2.0-OpenSSH_9.6\r\n\r\n'), 'HPE_INVALID_CONSTANT');
  t.equal(code('HTTP/2 200\r\n\r\n'), 'HPE_INVALID_CONSTANT');
  t.equal(code('HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n'), 'HPE_INVALID_CONTENT_LENGTH');
  t.equal(code('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n'), 'HPE_INVALID_CONTENT_LENGTH');
  t.equal(code('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'), 'HPE_INVALID_CHUNK_SIZE');
  t.equal(code('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n'), 'HPE_INVALID_CHUNK_SIZE');
  t.equal(code('HTTP/1.1 200 OK\r\nno colon here\r\n\r\n'), 'HPE_INVALID_HEADER_TOKEN');
  t.equal(code('HTTP/1.1 101 Switching Protocols\r\n\r\n'), 'HPE_UNEXPECTED_UPGRADE');
  t.equal(code(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(70 * 1024)}`), 'HPE_HEADER_OVERFLOW', 'a head without end');
  t.equal(code('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}', true), 'HPE_INCOMPLETE', 'cut short');

  const p = new ResponseParser();
  t.notOk(p.started);
  t.throws(() => p.end(), { code: 'HPE_INCOMPLETE', message: /before any answer/ });
  p.push(Buffer.from('HTTP/1.1 2'));
  t.ok(p.started, 'a byte of the answer came');
});
