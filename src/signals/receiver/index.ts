export { SSF_RECEIVER_PATH, ssfReceiver, type ReceiverDeps } from './push.js';
export { SSF_RECEIVED_SETS_COLLECTION } from '../collections.js';
