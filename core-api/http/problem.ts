export { ERROR_DOCS, problemBody } from '../../lib/problem.js';
