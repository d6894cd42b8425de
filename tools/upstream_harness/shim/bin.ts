/**
 * Where upstream's June snapshot harness boots its TypeScript agent (the harness spawns
 * `node --import tsx packages/ui/acp-agent/src/bin.ts CONFIG`), this boots dsh-py's agent
 * instead, so the harness drives our agent over the same ACP stdio with the same replay
 * contract: it passes `DSH_SNAPSHOT=replay`, `DSH_SNAPSHOT_FILE`, `DSH_SNAPSHOT_CHILD_FILES`
 * and `DSH_SNAPSHOT_OVERRIDE`, which our replay client reads under the same names.
 *
 * The harness harvests `<DSH_SNAPSHOT_SESSIONS_ROOT>/<cwd-bucket>/<id>.jsonl` (upstream's
 * JSONL layout); our store writes `<root>/<id>.jsonl`, so the bucket is our root.
 * The agent's argv is `DSH_UPSTREAM_HARNESS_AGENT` (a JSON array), set by the nox session.
 * The config path the harness passes is upstream's cordis.yml; our agent has none.
 */
import { spawn } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

function fail(message: string): never {
  process.stderr.write(`dsh-py harness shim: ${message}\n`)
  process.exit(2)
}

const argvText = process.env.DSH_UPSTREAM_HARNESS_AGENT
if (argvText === undefined || argvText === '') fail('DSH_UPSTREAM_HARNESS_AGENT is not set')
const argv = JSON.parse(argvText) as unknown
if (!Array.isArray(argv) || argv.length === 0 || !argv.every(part => typeof part === 'string')) {
  fail(`DSH_UPSTREAM_HARNESS_AGENT must be a JSON array of strings, got ${argvText}`)
}
const [command, ...args] = argv as string[]
if (process.env.DSH_SNAPSHOT !== 'replay') {
  fail(`only replay is supported (DSH_SNAPSHOT=${process.env.DSH_SNAPSHOT ?? ''})`)
}
const root = process.env.DSH_SNAPSHOT_SESSIONS_ROOT
if (root === undefined || root === '') fail('DSH_SNAPSHOT_SESSIONS_ROOT is not set')
const bucket = join(root, 'cwd-dsh-py')
mkdirSync(bucket, { recursive: true })

const child = spawn(command as string, args, {
  stdio: 'inherit',
  env: {
    ...process.env,
    DSH_MODEL_CLIENT: 'replay',
    DSH_ALLOW_MODEL_REQUESTS: '0',
    DSH_SESSIONS_ROOT: bucket,
    DSH_STORE: 'jsonl',
  },
})
child.on('error', (error) => fail(`cannot start ${command}: ${error.message}`))
child.on('exit', (code, signal) => {
  process.exit(code ?? (signal === null ? 1 : 128))
})
