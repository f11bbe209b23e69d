// Written by sdk/scripts/generate-schemas.ts from schemas/
// (npm run -s build && node dist/sdk/scripts/generate-schemas.js).
// Do not edit: test/unit/sdk-schemas.test.ts compares it with the service's schemas.
import type { SurfaceSchemas } from './validate.js';

export const SURFACES: SurfaceSchemas = {
  "a": {
    "path": "/v1/ingest/events",
    "maxBatchEvents": 100,
    "maxBodyBytes": 1048576,
    "event": {
      "type": "object",
      "required": [
        "event_name"
      ],
      "properties": {
        "event_name": {
          "type": "string",
          "minLength": 1,
          "maxLength": 255,
          "pattern": "^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$"
        },
        "customer_id": {
          "type": "string",
          "maxLength": 255
        },
        "external_customer_id": {
          "type": "string",
          "minLength": 1,
          "maxLength": 255
        },
        "external_source": {
          "type": "string",
          "minLength": 1,
          "maxLength": 64,
          "default": "internal"
        },
        "user_id": {
          "type": "string",
          "maxLength": 255
        },
        "product_id": {
          "type": "string",
          "format": "uuid"
        },
        "product_code": {
          "type": "string",
          "minLength": 1,
          "maxLength": 255
        },
        "properties": {
          "type": "object",
          "properties": {},
          "additionalProperties": true
        },
        "timestamp": {
          "type": "string",
          "format": "date-time"
        }
      }
    }
  },
  "b": {
    "path": "/v1/events",
    "backfillPath": "/v1/events/backfill",
    "maxBatchEvents": 1000,
    "maxBodyBytes": 3145728,
    "event": {
      "type": "object",
      "required": [
        "customer_id",
        "event_name"
      ],
      "properties": {
        "customer_id": {
          "type": "string",
          "minLength": 1,
          "maxLength": 255
        },
        "event_name": {
          "type": "string",
          "minLength": 1,
          "maxLength": 64,
          "pattern": "^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$"
        },
        "user_email": {
          "type": "string",
          "format": "email",
          "maxLength": 320
        },
        "user_external_id": {
          "type": "string",
          "minLength": 1,
          "maxLength": 255
        },
        "timestamp": {
          "type": "string",
          "format": "date-time"
        },
        "properties": {
          "type": "object",
          "properties": {},
          "additionalProperties": true
        },
        "external_id": {
          "type": "string",
          "minLength": 1,
          "maxLength": 128
        }
      }
    }
  }
};
