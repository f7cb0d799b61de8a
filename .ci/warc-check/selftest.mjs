#!/usr/bin/env node
// selftest.mjs FILE.warc.gz proves that check.mjs can fail. It first requires FILE (a good
// export) to pass, then writes damaged copies of it, one kind of damage each, and requires
// check.mjs to exit 1 on every copy and to name the damage. Exit 0 if so, 1 otherwise.
//
// The damage is done member by member (one gzip member holds one record), and a changed member
// is compressed again, so most copies are valid gzip and only the WARC checks can catch them.
import { spawnSync } from "node:child_process";
import { openSync, closeSync, fstatSync, mkdtempSync, mkdirSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { gzipMembers } from "./gzip-members.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const good = process.argv[2];
if (!good || process.argv.length !== 3) {
  console.error("usage: node selftest.mjs FILE.warc.gz");
  process.exit(2);
}

function check(file) {
  const res = spawnSync(process.execPath, [join(here, "check.mjs"), file], { encoding: "utf8" });
  return { status: res.status, out: (res.stdout || "") + (res.stderr || "") };
}

// Read the members: raw bytes and decompressed record.
const raw = readFileSync(good);
const fd = openSync(good, "r");
const members = [...gzipMembers(fd, fstatSync(fd).size)];
closeSync(fd);
const rawOf = (i) => raw.subarray(members[i].start, members[i].end);
const typeOf = (i) => /\r\nWARC-Type: *([a-z]+)/i.exec(members[i].data.toString("latin1"))?.[1];
const headerEnd = (b, from = 0) => b.indexOf("\r\n\r\n", from, "latin1"); // end of a header block

// A response record with a non-empty payload, and the request record before it.
const resp = members.findIndex((m, i) => {
  if (typeOf(i) !== "response") return false;
  const h = headerEnd(m.data), hh = headerEnd(m.data, h + 4);
  return hh > 0 && hh + 4 < m.data.length - 4;
});
const req = members.findIndex((_, i) => typeOf(i) === "request");
if (resp < 0 || req < 0) {
  console.error(`selftest: ${good} has no request or no response with a payload to damage`);
  process.exit(1);
}

// build returns the file with member i replaced by the records in bufs (each gzipped apart),
// or removed when bufs is empty.
function build(i, ...bufs) {
  const parts = [];
  members.forEach((_, j) => {
    if (j !== i) parts.push(rawOf(j));
    else for (const b of bufs) parts.push(gzipSync(b));
  });
  return Buffer.concat(parts);
}
function edited(i, fn) {
  const b = Buffer.from(members[i].data);
  fn(b);
  return build(i, b);
}

const cases = [
  {
    name: "one payload byte of a response changed (member re-gzipped)",
    bytes: edited(resp, (b) => { b[b.length - 5] ^= 0x20; }), // last payload byte, before CRLF CRLF
    wantAll: [/WARC-Payload-Digest mismatch/, /WARC-Block-Digest mismatch/],
  },
  {
    name: "one HTTP header byte of a response changed (payload intact)",
    bytes: edited(resp, (b) => { const h = headerEnd(b); b[h + 4 + 5] ^= 0x01; }), // in "HTTP/1.1"
    wantAll: [/WARC-Block-Digest mismatch/],
    wantNot: /WARC-Payload-Digest mismatch/,
  },
  {
    name: "one compressed byte changed (no re-gzip)",
    bytes: (() => { const b = Buffer.from(raw); const m = members[resp]; b[(m.start + m.end) >> 1] ^= 0xff; return b; })(),
    wantAll: [/gzip member at byte \d+: /], // zlib: "incorrect data check", "invalid distance ..."
  },
  {
    name: "a request record removed",
    bytes: build(req),
    wantAll: [/WARC-Concurrent-To <[^>]+>: no such record in this file/],
  },
  {
    name: "WARC-Date header renamed",
    bytes: edited(resp, (b) => { const i = b.indexOf("\r\nWARC-Date:", 0, "latin1"); b.write("X", i + 2, "latin1"); }),
    wantAll: [/no WARC-Date/],
  },
  {
    name: "Content-Length one too small",
    bytes: edited(resp, (b) => {
      const s = b.toString("latin1");
      const m = /\r\nContent-Length: (\d+)\r\n/.exec(s.slice(0, headerEnd(b) + 2));
      const n = String(Number(m[1]) - 1).padStart(m[1].length, "0"); // keep the length of the header
      b.write(n, m.index + "\r\nContent-Length: ".length, "latin1");
    }),
    wantAll: [/WARC-Block-Digest mismatch/, /gzip member at bytes \d+-\d+ does not hold exactly this one record/],
  },
  {
    name: "two records in one gzip member",
    bytes: (() => {
      const parts = members.map((_, j) => rawOf(j));
      parts.splice(req, 2, gzipSync(Buffer.concat([members[req].data, members[req + 1].data])));
      return Buffer.concat(parts);
    })(),
    wantAll: [/gzip member at bytes \d+-\d+ does not hold exactly this one record/],
  },
  {
    name: "file cut in the middle of the last record",
    bytes: raw.subarray(0, members.at(-1).start + ((members.at(-1).end - members.at(-1).start) >> 1)),
    wantAll: [/gzip member at byte \d+: unexpected end of file/],
  },
];

// A rendered page's DOM (a conversion record) must refer to its response: make one name the
// request before it (an ID of the same length, so only the link is wrong).
const conv = members.findIndex((_, i) => typeOf(i) === "conversion");
if (conv >= 2 && typeOf(conv - 2) === "request") {
  const idOf = (i) => /\r\nWARC-Record-ID: *(<[^>]+>)/i.exec(members[i].data.toString("latin1"))[1];
  cases.push({
    name: "a conversion record referring to the request instead of the response",
    bytes: edited(conv, (b) => {
      const s = b.toString("latin1");
      const m = /\r\nWARC-Refers-To: *(<[^>]+>)/i.exec(s);
      b.write(idOf(conv - 2), m.index + m[0].length - m[1].length, "latin1");
    }),
    wantAll: [/WARC-Refers-To <[^>]+>: a request record, want the response/],
  });
}

const tmp = mkdtempSync(join(tmpdir(), "warc-selftest-"));
let failed = 0;
try {
  const base = check(good);
  if (base.status !== 0) {
    console.log(`selftest: FAIL: the undamaged file does not pass (exit ${base.status}):\n${base.out}`);
    failed++;
  }
  cases.forEach((c, n) => {
    const dir = join(tmp, String(n));
    mkdirSync(dir);
    const file = join(dir, basename(good)); // same name: WARC-Filename still matches
    writeFileSync(file, c.bytes);
    const { status, out } = check(file);
    const missing = c.wantAll.filter((re) => !re.test(out));
    const unwanted = c.wantNot && c.wantNot.test(out);
    if (status !== 1 || missing.length || unwanted) {
      failed++;
      console.log(`selftest: FAIL: ${c.name}: exit ${status}` +
        (missing.length ? `, output lacks ${missing.join(", ")}` : "") +
        (unwanted ? `, output has ${c.wantNot}` : "") + `\n${out}`);
    } else {
      const line = out.split("\n").find((l) => l.startsWith("  ") && c.wantAll[0].test(l)) || "";
      console.log(`selftest: rejected as it should: ${c.name}\n    ${line.trim()}`);
    }
  });
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
console.log(failed ? `selftest: ${failed} failures` : `selftest: ok: ${basename(good)} passes, all ${cases.length} damaged copies are rejected`);
process.exit(failed ? 1 : 0);
