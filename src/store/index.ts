export * from './types.js';
export { openStore } from './open.js';
export { storageDigest } from './digest.js';
