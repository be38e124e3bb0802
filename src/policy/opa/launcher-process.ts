/**
 * The OPA launcher's process (launcher.ts): runs the opa commands its parent sends over IPC, each
 * to completion under its limits, and answers each with how it ended. It ends with its parent:
 * when the channel closes it kills the runs under way and exits.
 */
import { killEveryRun, runToCompletion, type RunLimits } from './run-to-completion.js';

export interface LaunchJob {
  id: number;
  binary: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  limits: RunLimits;
}

process.on('message', (job: LaunchJob) => {
  void runToCompletion(job.binary, job.args, job.env, job.limits).then((outcome) => {
    if (process.connected) process.send?.({ id: job.id, outcome });
  });
});

process.on('disconnect', () => {
  killEveryRun();
  process.exit(0);
});
