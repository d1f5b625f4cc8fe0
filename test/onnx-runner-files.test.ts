/**
 * What the ONNX runner leaves on disk: nothing. ONNX Runtime's Linux builds carry a telemetry
 * uploader (the 1DS SDK) that, once the first ORT environment is made, writes a device id and a
 * queue of events under the user's cache directory and a debug log and a session file in the
 * temporary directory; the runner turns it off. Checked in a child process with a fresh HOME and
 * TMPDIR that loads a model through the runner and runs it, under a host that asked for telemetry.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { bounded } from './helpers/sync'

const CHILD = path.join(__dirname, 'fixtures', 'onnx-runner-child.ts')

/** Variables that make ONNX Runtime keep its telemetry off by itself (a CI, its own test harness):
 * the child must run without them, or it would prove nothing. */
const SUPPRESSING = [
  'CI', 'TF_BUILD', 'GITHUB_ACTIONS', 'GITLAB_CI', 'CIRCLECI', 'TRAVIS', 'JENKINS_URL', 'CODEBUILD_BUILD_ID', 'BUILDKITE',
  'TEAMCITY_VERSION', 'APPVEYOR', 'BITBUCKET_BUILD_NUMBER', 'SYSTEM_TEAMFOUNDATIONCOLLECTIONURI', 'ORT_RUNNING_UNIT_TESTS'
]

function freshDirectory (t: Test, prefix: string): string {
  const directory = mkdtempSync(path.join(tmpdir(), prefix))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return directory
}

const contents = (directory: string) => readdirSync(directory, { recursive: true }).map(String).sort()

t.test('a process that loads and runs a model writes no file in HOME or TMPDIR, even when its host asks for telemetry', async (t) => {
  const home = freshDirectory(t, 'fts-home-')
  const temporary = freshDirectory(t, 'fts-tmp-')
  const env: NodeJS.ProcessEnv = {
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !SUPPRESSING.includes(name))),
    HOME: home,
    XDG_CACHE_HOME: path.join(home, '.cache'),
    TMPDIR: temporary,
    // The host's own setting, which the runner does not leave to it.
    ORT_DISABLE_TELEMETRY: '0',
    // tsx compiles the fixture without its cache in TMPDIR; the child's coverage is not merged.
    TSX_DISABLE_CACHE: '1',
    _TAPJS_PROCESSINFO_COVERAGE_: '0'
  }
  const { stdout } = await bounded(promisify(execFile)(process.execPath, ['--import', 'tsx', CHILD], { env }), 'the child running a model')
  const { pid, outputs } = JSON.parse(stdout) as { pid: number, outputs: Array<{ name: string, data: number[] }> }
  const debugLog = `mat-debug-${pid}.log`
  t.teardown(() => rmSync(path.join('/tmp', debugLog), { force: true }))

  t.same(outputs.map(({ name, data }) => [name, data[0]]), [['OUTPUT0', 4], ['OUTPUT1', 2]], 'the model ran')
  t.same(contents(home), [], 'nothing in HOME (no .cache/Microsoft/DeveloperTools/.onnxruntime, no deviceid, no event queue)')
  t.same(contents(temporary), [], 'nothing in TMPDIR (no debug log, no .ses)')
  t.notOk(existsSync(path.join('/tmp', debugLog)), `no /tmp/${debugLog}`)
})
