export * from './types.js';
export { openStore } from './open.js';
