import { ConfigError, configWarnings, loadConfig } from './config/index.js';
import { consoleToLog, createLogger } from './log/index.js';

const ADMIN_KEY_MESSAGE = 'Admin API key for this run (set SERVICE_ADMIN_API_KEY to choose one)';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  const log = createLogger(config.logLevel);
  consoleToLog(log);
  for (const warning of configWarnings(config)) log.warn(warning);
  // Loaded only after the configuration is valid, so that a bad value is reported alone.
  const { startServer } = await import('./server.js');
  const running = await startServer(config, log);
  const { listening } = running;
  log.info(
    { issuer: config.issuer, store: config.storeUrl.split(':')[0], listening },
    listening.admin
      ? `Arbiter is listening on ${listening.public}; the Admin API, the console and /metrics on ${listening.admin}`
      : `Arbiter is listening on ${listening.public}, the Admin API, the console and /metrics included`,
  );
  if (config.adminApiKeyGenerated) {
    // Printed once, on purpose and whatever LOG_LEVEL says: a development start has no other way to learn it.
    const line = { level: 40, time: Date.now(), msg: ADMIN_KEY_MESSAGE, adminApiKey: config.adminApiKey };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
  const stop = async (signal: string) => {
    log.info({ signal }, 'stopping');
    await running.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error: unknown) => {
  // One line on stderr, whatever LOG_LEVEL says: the console may be routed into the log by now.
  process.stderr.write(`Arbiter failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
