export { SSF_RECEIVED_SETS_COLLECTION, SSF_RECEIVER_PATH, ssfReceiver, type ReceiverDeps } from './push.js';
