import { uuidv7 } from '../../lib/ids.js';
import { ApiError, problemBody } from '../../lib/problem.js';
import { methodOf, STATUS_TEXT, type HttpRequest, type HttpResponse } from '../../lib/http/uws.js';
import { refuseUnread } from '../../lib/http/body.js';

/** A path of surface B's with no endpoint: `/v1/events/`, `//v1/events`, `/v1/events/x`. */
const PATH_B = /^\/+v1\/+events(?:\/|$)/;

/**
 * For the tier's catch-all: surface B's 404 (problem+json) for a path under /v1/events that names
 * no endpoint, which a surface-B client reads like its other errors; false, nothing answered, for
 * any other path (surface A's 404 then). The body is left to uWS to drop, as for surface A's 404.
 */
export function unknownPathB(baseUrl: string) {
  return (res: HttpResponse, req: HttpRequest): boolean => {
    const url = req.getUrl();
    if (!PATH_B.test(url)) return false;
    const traceId = uuidv7();
    const method = methodOf(req);
    const e = new ApiError(
      'not_found',
      `No endpoint ${method} ${url}; surface B has POST /v1/events, GET /v1/events and POST /v1/events/backfill.`,
    );
    const body = JSON.stringify(problemBody(baseUrl, e, url, traceId));
    const headers: Array<[string, string]> = [
      ['Content-Type', 'application/problem+json'],
      ['X-Trace-Id', traceId],
      ['Cache-Control', 'no-store'],
    ];
    refuseUnread(res, req, method === 'HEAD', STATUS_TEXT[404], headers, body);
    return true;
  };
}
