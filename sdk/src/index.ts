export {
  type BackfillJob,
  type BatchInfo,
  type EventA,
  type EventB,
  IngestClient,
  type IngestClientEvents,
  type IngestClientOptions,
  type IngestEvent,
  type Stats,
  type Surface,
} from './client.js';
export {
  ClientClosedError,
  HttpStatusError,
  IngestClientError,
  NetworkError,
  RequestTimeoutError,
} from './errors.js';
export type { Problem } from './validate.js';
