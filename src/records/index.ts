export {
  RecordRepository,
  type RecordCheck,
  type RecordExtras,
  type RecordJournal,
  type RemovalCheck,
  type SecretHashing,
  type StoredRecord,
  type WriteOptions,
  type Written,
} from './repository.js';
