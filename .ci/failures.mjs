// Prints the failed tests of a vitest JSON report, one block each: file, title, the first and
// last lines of the failure. CI prints this last, so a truncated log still names what failed.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const report = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const failed = report.testResults.flatMap((file) => {
  const tests = file.assertionResults.filter((t) => t.status === 'failed');
  if (tests.length === 0 && file.status === 'failed') return [{ file: file.name, title: '(the file failed to run)', messages: [file.message ?? ''] }];
  return tests.map((t) => ({ file: file.name, title: t.fullName, messages: t.failureMessages }));
});
console.log(`::: ${process.argv[2]}: ${report.numFailedTests} failed of ${report.numTotalTests}`);
for (const f of failed) {
  console.log(`--- FAILED ${relative(process.cwd(), f.file)} > ${f.title}`);
  for (const m of f.messages) {
    // The head says what failed; an assertion's own values ("expected 130 to be 0") can sit after a
    // long custom message, so those lines and the first stack frame (where) are printed too.
    const lines = m.split('\n');
    if (lines.length <= 14) {
      console.log(m);
      continue;
    }
    const values = lines
      .slice(8)
      .filter((l) => /expected|Expected|Received/.test(l))
      .slice(0, 6);
    // A server's output quoted in the message: its warnings and errors say why (the last 12).
    const problems = lines
      .slice(8)
      .filter((l) => /"level":(40|50|60)|\b(WARN|ERROR)\b/.test(l))
      .slice(-12)
      .map((l) => `    ${l.slice(0, 400)}`);
    const whereAt = lines.findIndex((l) => /^\s+at /.test(l));
    const where = whereAt >= 0 ? lines[whereAt] : undefined;
    // The message's last lines before its stack: a script's output ends with what stopped it.
    const bodyEnd = whereAt >= 0 ? whereAt : lines.length;
    const tail = lines
      .slice(Math.max(8, bodyEnd - 12), bodyEnd)
      .filter((l) => !values.includes(l))
      .map((l) => `    ${l.slice(0, 400)}`);
    console.log(
      [...lines.slice(0, 8), '    ...', ...problems, ...(tail.length ? ['    ... its last lines:', ...tail] : []), ...values, ...(where ? [where] : [])].join(
        '\n',
      ),
    );
  }
}
