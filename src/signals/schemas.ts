/** The request bodies of the SSF stream management API (SSF 1.0 §8) and of RFC 8936 polling, with their bounds. */

const streamId = { type: 'string', minLength: 1, maxLength: 64 } as const;
const uri = { type: 'string', minLength: 1, maxLength: 2048 } as const;

const DELIVERY = {
  type: 'object',
  required: ['method'],
  properties: {
    method: { enum: ['urn:ietf:rfc:8935', 'urn:ietf:rfc:8936'] },
    endpoint_url: uri,
    // A header value every push can send (RFC 9110 §5.5: visible ASCII, spaces and tabs; no CR or
    // LF): another was accepted, and then every delivery failed until its SETs were dropped.
    authorization_header: { type: 'string', minLength: 1, maxLength: 4096, pattern: '^[\\x20-\\x7E\\t]+$' },
  },
} as const;

const streamFields = {
  stream_id: streamId,
  delivery: DELIVERY,
  events_requested: { type: 'array', maxItems: 32, items: uri },
  description: { type: 'string', maxLength: 256 },
  default_subjects: { enum: ['ALL', 'NONE'] },
} as const;

/** POST (create) and PUT (replace): the receiver-supplied fields; others (iss, aud, events_delivered…) are the transmitter's and ignored. */
export const STREAM_REQUEST = { type: 'object', required: ['delivery'], properties: streamFields } as const;
/** PATCH: only the fields given change. */
export const STREAM_UPDATE = { type: 'object', required: ['stream_id'], properties: streamFields } as const;

export interface StreamRequest {
  stream_id?: string;
  delivery?: { method: string; endpoint_url?: string; authorization_header?: string };
  events_requested?: string[];
  description?: string;
  default_subjects?: 'ALL' | 'NONE';
}

export const STATUS_UPDATE = {
  type: 'object',
  required: ['stream_id', 'status'],
  properties: {
    stream_id: streamId,
    status: { enum: ['enabled', 'paused', 'disabled'] },
    reason: { type: 'string', maxLength: 256 },
  },
} as const;

/** RFC 9493 identifiers of the formats this transmitter emits. */
const SUBJECT = {
  oneOf: [
    {
      type: 'object',
      required: ['format', 'iss', 'sub'],
      properties: { format: { const: 'iss_sub' }, iss: uri, sub: { type: 'string', minLength: 1, maxLength: 256 } },
    },
    {
      type: 'object',
      required: ['format', 'email'],
      properties: { format: { const: 'email' }, email: { type: 'string', minLength: 3, maxLength: 320, pattern: '@' } },
    },
    {
      type: 'object',
      required: ['format', 'id'],
      properties: { format: { const: 'opaque' }, id: { type: 'string', minLength: 1, maxLength: 256 } },
    },
  ],
} as const;

export const SUBJECT_REQUEST = {
  type: 'object',
  required: ['stream_id', 'subject'],
  properties: { stream_id: streamId, subject: SUBJECT, verified: { type: 'boolean' } },
} as const;

export interface SubjectRequest {
  stream_id: string;
  subject: Record<string, string>;
  verified?: boolean;
}

export const VERIFY_REQUEST = {
  type: 'object',
  required: ['stream_id'],
  properties: { stream_id: streamId, state: { type: 'string', maxLength: 256 } },
} as const;

/** RFC 8936 §2.4. */
export const POLL_REQUEST = {
  type: 'object',
  properties: {
    maxEvents: { type: 'integer', minimum: 0, maximum: 1000 },
    returnImmediately: { type: 'boolean' },
    ack: { type: 'array', maxItems: 1000, items: { type: 'string', maxLength: 256 } },
    setErrs: {
      type: 'object',
      maxProperties: 1000,
      additionalProperties: {
        type: 'object',
        required: ['err'],
        properties: { err: { type: 'string', maxLength: 64 }, description: { type: 'string', maxLength: 1024 } },
      },
    },
  },
} as const;

export interface PollRequest {
  maxEvents?: number;
  returnImmediately?: boolean;
  ack?: string[];
  setErrs?: Record<string, { err: string; description?: string }>;
}
