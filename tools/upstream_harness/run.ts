/**
 * `nox -s upstream_harness`: our exported scenarios through upstream's own June ACP snapshot
 * harness. `runScenario` (upstream's `examples/acp-agent/tests/snapshot-harness.ts`) boots the
 * agent, drives every `input.json` op over real ACP stdio in replay mode with the exported
 * `session.jsonl` / `session.N.jsonl` as the recording, and harvests the logs from upstream's
 * sessions-root layout; upstream's own normalizers (`normalizeStdout` / `normalizeSessionLog`
 * from the acp-snapshot kit) turn the run and the fixture into comparable text. Both files are
 * copied from ../shared/upstream-src at run time by stage.py, never committed. This file only
 * reads the staged manifest, calls them, and compares.
 *
 * The comparison forgives exactly the documented differences (COMPATIBILITY.md,
 * `dsh_snapshot.UPSTREAM_ALLOWANCES`): the `initialize` result's `agentInfo` /
 * `agentCapabilities`, and the header keys `origin` / `delegationDepth` where the fixture has
 * none; for a `current`-loop scenario also its `request/header` events, which the June export
 * drops. Children are matched as a set (the June harness orders them by `createdAt`, which
 * concurrent siblings can share). The replay must have consumed the recording exactly.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runScenario, type InputScript, type RunResult } from './examples/acp-agent/tests/snapshot-harness.ts'
import { normalizeSessionLog, normalizeStdout, type NormalizeContext } from './upstream/normalize.ts'

interface Entry {
  name: string
  dir: string
  loop: 'june' | 'current'
  maxDelegationDepth?: number
}

type Json = Record<string, unknown>

const ADDED_HEADER_KEYS = ['origin', 'delegationDepth']

function lines(text: string): string[] {
  return text.split('\n').filter(line => line.trim().length > 0)
}

/** The run's stdout frames with the initialize allowance applied against the golden. */
function allowStdout(actual: string[], expected: string[]): string[] {
  return actual.map((line, index) => {
    const frame = JSON.parse(line) as Json
    const want = expected[index] === undefined ? undefined : JSON.parse(expected[index]) as Json
    const result = frame.result as Json | undefined
    const wantResult = want?.result as Json | undefined
    if (result === undefined || wantResult === undefined || !('protocolVersion' in result)) return line
    for (const key of ['agentInfo', 'agentCapabilities']) {
      if (key in wantResult) result[key] = wantResult[key]
      else delete result[key]
    }
    return JSON.stringify(frame)
  })
}

/** One harvested log with the header and `request/header` allowances applied. */
function allowLog(actual: string, expected: string, loop: Entry['loop']): string {
  const wantHeader = JSON.parse(lines(expected)[0] ?? '{}') as Json
  const out: string[] = []
  let dropped = 0
  const [headerLine, ...events] = lines(actual)
  const header = JSON.parse(headerLine ?? '{}') as Json
  for (const key of ADDED_HEADER_KEYS) if (!(key in wantHeader)) delete header[key]
  const seedLength = typeof header.seedLength === 'number' ? header.seedLength : undefined
  let droppedInSeed = 0
  events.forEach((line, index) => {
    const event = JSON.parse(line) as Json
    if (loop === 'current' && event.type === 'request/header') {
      dropped += 1
      if (seedLength !== undefined && index < seedLength) droppedInSeed += 1
      return
    }
    if (dropped > 0 && typeof event.seq === 'number') event.seq -= dropped
    out.push(JSON.stringify(event))
  })
  if (seedLength !== undefined) header.seedLength = seedLength - droppedInSeed
  return [JSON.stringify(header), ...out].join('\n') + '\n'
}

/** The first difference between two texts, line by line, or undefined when equal. */
function firstDifference(what: string, expected: string, actual: string): string | undefined {
  const want = lines(expected)
  const got = lines(actual)
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    if (want[i] !== got[i]) {
      return `${what} line ${i + 1}:\n  expected ${want[i] ?? '(no line)'}\n  actual   ${got[i] ?? '(no line)'}`
    }
  }
  return undefined
}

async function childFiles(dir: string): Promise<string[]> {
  const names = (await readdir(dir)).filter(name => /^session\.\d+\.jsonl$/.test(name))
  names.sort((a, b) => Number(a.split('.')[1]) - Number(b.split('.')[1]))
  return names.map(name => join(dir, name))
}

async function compare(entry: Entry, result: RunResult): Promise<string[]> {
  const problems: string[] = []
  const ctx: NormalizeContext = {
    sessionIds: [...new Set([result.sessionId, ...result.sessionLogs.map(log => log.id)])]
      .filter((id): id is string => id !== undefined && id.length > 0),
    cwd: result.cwd,
  }
  const golden = normalizeStdout(await readFile(join(entry.dir, 'stdout.golden.jsonl'), 'utf8'), ctx)
  const actualStdout = normalizeStdout(result.rawStdout, ctx)
  const stdoutDiff = firstDifference(
    'stdout.golden.jsonl',
    golden,
    allowStdout(lines(actualStdout), lines(golden)).join('\n'),
  )
  if (stdoutDiff !== undefined) problems.push(stdoutDiff)

  const fixtures = [join(entry.dir, 'session.jsonl'), ...await childFiles(entry.dir)]
  const expected = await Promise.all(fixtures.map(async file => normalizeSessionLog(await readFile(file, 'utf8'), ctx)))
  const actual = result.sessionLogs.map(log => normalizeSessionLog(log.content, ctx))
  if (actual.length !== expected.length) {
    problems.push(`harvested ${actual.length} session logs, the fixture has ${expected.length}`)
    return problems
  }
  const primaryDiff = firstDifference('session.jsonl', expected[0] ?? '', allowLog(actual[0] ?? '', expected[0] ?? '', entry.loop))
  if (primaryDiff !== undefined) problems.push(primaryDiff)
  const unmatched = actual.slice(1)
  fixtures.slice(1).forEach((file, offset) => {
    const want = expected[offset + 1] ?? ''
    const at = unmatched.findIndex(log => allowLog(log, want, entry.loop) === want)
    if (at >= 0) {
      unmatched.splice(at, 1)
      return
    }
    const closest = unmatched[0] === undefined ? '' : allowLog(unmatched[0], want, entry.loop)
    problems.push(firstDifference(file.split('/').at(-1) ?? file, want, closest) ?? `${file}: no harvested child matches`)
  })
  return problems
}

async function runOne(entry: Entry): Promise<string[]> {
  const input = JSON.parse(await readFile(join(entry.dir, 'input.json'), 'utf8')) as InputScript
  const scratch = await mkdtemp(join(tmpdir(), 'dsh-upstream-harness-'))
  const report = join(scratch, 'replay-report.json')
  process.env.DSH_LOOP_PROFILE = entry.loop
  process.env.DSH_REPLAY_REPORT = report
  if (entry.maxDelegationDepth === undefined) delete process.env.DSH_MAX_DELEGATION_DEPTH
  else process.env.DSH_MAX_DELEGATION_DEPTH = String(entry.maxDelegationDepth)
  try {
    const override = join(entry.dir, 'replay.override.json')
    const workspace = join(entry.dir, 'workspace')
    const result = await runScenario(input, {
      mode: 'replay',
      fixtureFile: join(entry.dir, 'session.jsonl'),
      childFiles: await childFiles(entry.dir),
      ...existsSync(override) ? { overrideFile: override } : {},
      ...existsSync(workspace) ? { workspaceDir: workspace } : {},
    })
    const problems = await compare(entry, result)
    if (!existsSync(report)) {
      problems.push(`the agent wrote no replay report; its stderr:\n${result.stderr.slice(-2000)}`)
    } else {
      const consumed = JSON.parse(await readFile(report, 'utf8')) as { ok?: unknown; problems?: unknown }
      if (consumed.ok !== true) problems.push(`replay not consumed exactly: ${JSON.stringify(consumed.problems)}`)
    }
    return problems
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

const manifestPath = process.argv[2]
if (manifestPath === undefined) {
  process.stderr.write('usage: node --import tsx run.ts MANIFEST\n')
  process.exit(2)
}
const entries = JSON.parse(await readFile(manifestPath, 'utf8')) as Entry[]
let passed = 0
let failed = 0
for (const entry of entries) {
  let problems: string[]
  try {
    problems = await runOne(entry)
  } catch (error: unknown) {
    problems = [`the harness threw: ${error instanceof Error ? error.stack ?? error.message : String(error)}`]
  }
  if (problems.length === 0) {
    passed += 1
    process.stdout.write(`PASS ${entry.name} (${entry.loop} loop)\n`)
  } else {
    failed += 1
    process.stdout.write(`FAIL ${entry.name} (${entry.loop} loop)\n${problems.map(p => `  - ${p}`).join('\n')}\n`)
  }
}
process.stdout.write(`upstream-harness: ${passed} passed, ${failed} failed\n`)
process.exit(failed === 0 && passed > 0 ? 0 : 1)
