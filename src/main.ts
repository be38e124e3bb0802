import { ConfigError, configWarnings, loadConfig } from './config/index.js';
import { createLogger } from './log/index.js';

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
  for (const warning of configWarnings(config)) log.warn(warning);
  // Loaded only after the configuration is valid, so that a bad value is reported alone.
  const { startServer } = await import('./server.js');
  const running = await startServer(config, log);
  log.info(
    { issuer: config.issuer, store: config.storeUrl.split(':')[0], listening: running.url },
    'Arbiter is listening',
  );
  if (config.adminApiKeyGenerated) {
    // Printed once, on purpose: a development start has no other way to learn it.
    console.log(`Admin API key for this run (set SERVICE_ADMIN_API_KEY to choose one): ${config.adminApiKey}`);
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
  console.error(`Arbiter failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
