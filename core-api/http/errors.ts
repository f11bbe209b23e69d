// The catalogue and the problem+json shape are shared with the ingest tier (surface B).
export {
  ApiError,
  ERRORS,
  fieldErrors,
  invalid,
  notFound,
  type ErrorCode,
  type FieldError,
} from '../../lib/problem.js';
