#!/usr/bin/env node
// check.mjs FILE.warc.gz... validates WARC files written by `crawl export --format warc` with
// tools that share no code with the Go writer or the Go tests' reader: webrecorder's warcio.js
// (the parser behind ReplayWeb.page) reads the records, Node's crypto recomputes the digests and
// Node's zlib checks the gzip members. It prints one summary line per file and a total, lists
// every problem, and exits 0 if there were none, 1 if there were, 2 on a usage error.
//
// Checks, per record:
//   - the version line is WARC/1.1; WARC-Record-ID (a <URI>, unique over all files), WARC-Date
//     (ISO 8601 UTC), WARC-Type (a WARC 1.1 type) and Content-Length are present and well formed;
//     Content-Type is present when the block is not empty; request and response records have a
//     WARC-Target-URI that is an absolute URL;
//   - the block has Content-Length bytes and is followed by CRLF CRLF (warcio's warnings count);
//   - WARC-Block-Digest is present and equals sha1(block) in base32 (sha256/sha512/md5, base32
//     or hex, are also understood);
//   - for application/http blocks (request, response): the HTTP header parses (warcio's
//     StatusAndHeadersParser) and ends in CRLF CRLF; WARC-Payload-Digest, required on responses,
//     equals the digest of the bytes after it; a Content-Length in the HTTP header equals the
//     payload length (but for a revisit, which keeps no payload) and a response carries no
//     Transfer-Encoding (the exporter stores decoded, unchunked bodies);
//   - a revisit record names a WARC 1.1 revisit profile, a WARC-Refers-To-Target-URI (its own
//     target for server-not-modified) and, if any, a WARC-Refers-To-Date no later than its own;
//     its block is an HTTP response header; with identical-payload-digest it has no payload and
//     its WARC-Payload-Digest (the earlier payload's) is well formed;
//   - a conversion record (a rendered page's DOM) has a WARC-Target-URI, no WARC-Concurrent-To
//     nor WARC-IP-Address (WARC 1.1 forbids them there), a WARC-Payload-Digest, if any, equal
//     to its block's, and a WARC-Refers-To naming a response or revisit record of the same file
//     with the same WARC-Target-URI, written before it;
//   - every WARC-Concurrent-To names a record of the same file that names this one back, and
//     every WARC-Warcinfo-ID names a warcinfo record of the same file;
// and per file:
//   - the first record is a warcinfo whose WARC-Filename is the file's name;
//   - the file is a sequence of gzip members, each with a valid CRC and length, each holding
//     exactly one record (so offsets in a CDX index point at records).
//
// Memory: records are streamed; the largest single record is held in memory at once.
import { createReadStream, openSync, closeSync, fstatSync } from "node:fs";
import { basename } from "node:path";
import { createHash } from "node:crypto";
import { WARCParser, AsyncIterReader, StatusAndHeadersParser } from "warcio";
import { gzipMembers } from "./gzip-members.mjs";

const WARC_TYPES = new Set([
  "warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion", "continuation",
]);
const REVISIT_PROFILES = new Set([
  "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
  "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
]);
const CRLFCRLF = Buffer.from("\r\n\r\n");
const MAX_LISTED = 50; // problems printed per file; all are counted

// show quotes a header value for a message, cut to 80 characters.
const show = (s) => JSON.stringify(s.length > 80 ? s.slice(0, 80) + "..." : s);

// base32 is RFC 4648 base32 with padding removed, as WARC digests are written.
function base32(buf) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let out = "", bits = 0, value = 0;
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

const ALGOS = { sha1: "sha1", "sha-1": "sha1", sha256: "sha256", "sha-256": "sha256", sha512: "sha512", md5: "md5" };

// digestMismatch returns "" if the labelled digest ("sha1:BASE32") matches data, else why not.
function digestMismatch(labelled, data) {
  const m = /^([A-Za-z0-9-]+):([A-Za-z0-9=]+)$/.exec(labelled);
  if (!m) return `malformed digest ${show(labelled)}`;
  const algo = ALGOS[m[1].toLowerCase()];
  if (!algo) return `unsupported digest algorithm ${m[1]}`;
  const sum = createHash(algo).update(data).digest();
  const got = m[2].replace(/=+$/, "");
  if (got.toUpperCase() === base32(sum) || got.toLowerCase() === sum.toString("hex")) return "";
  return `is ${labelled}, computed ${m[1]}:${base32(sum)}`;
}

// httpSplit parses the HTTP header at the start of an application/http block with warcio and
// returns it with the offset where the payload starts.
async function httpSplit(block) {
  const reader = new AsyncIterReader([block], null);
  const parsed = await new StatusAndHeadersParser().parse(reader, { headersClass: Headers });
  return { parsed, offset: reader.getReadOffset() };
}

async function checkFile(path, allIDs) {
  const problems = [];
  const name = basename(path);
  const stats = { records: 0, types: {}, blockDigests: 0, payloadDigests: 0, pairs: 0, refers: 0 };
  const records = []; // { id, type, uri, cl, concurrent[], warcinfo, warcHeaderLen }
  const where = (i, r) => `record ${i}` + (r ? ` (${r.type || "?"} ${r.id || "no id"}${r.uri ? " " + r.uri : ""})` : "");
  const problem = (i, r, msg) => problems.push(`${name}: ${where(i, r)}: ${msg}`);

  // Pass 1: warcio reads the file as a replay tool would.
  const warned = [];
  const origWarn = console.warn;
  console.warn = (...a) => warned.push(a.join(" "));
  try {
    const parser = new WARCParser(createReadStream(path), { parseHttp: false });
    let i = 0;
    for await (const record of parser) {
      const h = record.warcHeaders.headers;
      const r = {
        id: h.get("WARC-Record-ID"), type: h.get("WARC-Type"), uri: h.get("WARC-Target-URI"),
        concurrent: [], warcinfo: h.get("WARC-Warcinfo-ID"), refersTo: h.get("WARC-Refers-To"),
      };
      records.push(r);
      stats.records++;
      const t = r.type || "untyped";
      stats.types[t] = (stats.types[t] || 0) + 1;
      const bad = (msg) => problem(i, r, msg);

      if (record.warcHeaders.statusline !== "WARC/1.1") bad(`version line ${show(record.warcHeaders.statusline)}, want WARC/1.1`);
      if (!r.id) bad("no WARC-Record-ID");
      else if (!/^<[^<>\s]+:[^<>\s]+>$/.test(r.id)) bad(`malformed WARC-Record-ID ${show(r.id)}`);
      else if (allIDs.has(r.id)) bad(`WARC-Record-ID also used by ${allIDs.get(r.id)}`);
      else allIDs.set(r.id, `${name} record ${i}`);
      const date = h.get("WARC-Date");
      if (!date) bad("no WARC-Date");
      else if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(date) || Number.isNaN(Date.parse(date))) bad(`malformed WARC-Date ${show(date)}`);
      if (!r.type) bad("no WARC-Type");
      else if (!WARC_TYPES.has(r.type)) bad(`unknown WARC-Type ${show(r.type)}`);
      const clText = h.get("Content-Length");
      r.cl = /^\d+$/.test(clText || "") ? Number(clText) : -1;
      if (r.cl < 0) bad(clText ? `malformed Content-Length ${show(clText)}` : "no Content-Length");
      if (r.cl > 0 && !h.get("Content-Type")) bad("no Content-Type for a non-empty block");
      if (r.type === "revisit") {
        const profile = h.get("WARC-Profile") || "";
        if (!REVISIT_PROFILES.has(profile)) bad(`WARC-Profile ${show(profile)}, want a WARC 1.1 revisit profile`);
        const ref = h.get("WARC-Refers-To-Target-URI") || "";
        if (/\s|^<|>$/.test(ref) || !URL.canParse(ref)) bad(`WARC-Refers-To-Target-URI is not an absolute URL: ${show(ref)}`);
        else if (profile.endsWith("/server-not-modified") && ref !== r.uri) bad(`a server-not-modified revisit refers to another URI ${show(ref)}`);
        const refDate = h.get("WARC-Refers-To-Date");
        if (refDate !== null && (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(refDate) || Number.isNaN(Date.parse(refDate)))) bad(`malformed WARC-Refers-To-Date ${show(refDate)}`);
        else if (refDate !== null && Date.parse(refDate) > Date.parse(h.get("WARC-Date") || "")) bad(`WARC-Refers-To-Date ${refDate} is after the revisit's WARC-Date`);
      }
      if (r.type === "conversion") {
        if (!r.refersTo) bad("a conversion record without WARC-Refers-To");
        for (const f of ["WARC-Concurrent-To", "WARC-IP-Address"]) if (h.get(f) !== null) bad(`a conversion record with ${f}`);
      }
      if (r.type === "request" || r.type === "response" || r.type === "revisit" || r.type === "conversion") {
        if (!r.uri) bad("no WARC-Target-URI");
        else if (/\s|^<|>$/.test(r.uri) || !URL.canParse(r.uri)) bad(`WARC-Target-URI is not an absolute URL: ${show(r.uri)}`);
      }
      for (const v of (h.get("WARC-Concurrent-To") || "").split(",")) {
        if (v.trim()) r.concurrent.push(v.trim());
      }

      const block = Buffer.from(await record.readFully(false));
      if (r.cl >= 0 && block.length !== r.cl) bad(`block is ${block.length} bytes, Content-Length says ${r.cl} (file truncated?)`);

      const blockDigest = h.get("WARC-Block-Digest");
      if (!blockDigest) bad("no WARC-Block-Digest");
      else {
        const why = digestMismatch(blockDigest, block);
        if (why) bad(`WARC-Block-Digest mismatch: ${why}`);
        else stats.blockDigests++;
      }

      const payloadDigest = h.get("WARC-Payload-Digest");
      const isHTTP = /^application\/http\b/i.test(h.get("Content-Type") || "");
      if ((r.type === "request" || r.type === "response") && !isHTTP) bad(`Content-Type ${show(h.get("Content-Type") || "")}, want application/http`);
      if (isHTTP && block.length > 0) {
        const { parsed, offset } = await httpSplit(block);
        const payload = block.subarray(offset);
        if (!parsed) bad("HTTP block has no status line");
        else {
          const line = parsed.statusline;
          if ((r.type === "response" || r.type === "revisit") && !/^HTTP\/\d(\.\d)? \d{3}( |$)/.test(line)) bad(`bad HTTP status line ${show(line)}`);
          if (r.type === "request" && !/^[A-Z]+ \S+ HTTP\/\d(\.\d)?$/.test(line)) bad(`bad HTTP request line ${show(line)}`);
          if (offset < 4 || !block.subarray(offset - 4, offset).equals(CRLFCRLF)) bad("HTTP header does not end with CRLF CRLF");
          const hcl = parsed.headers.get("Content-Length");
          // A revisit keeps the answer's header but not its payload (gowarc marks it WARC-Truncated).
          if (hcl !== null && r.type !== "revisit" && hcl !== String(payload.length)) bad(`HTTP Content-Length ${hcl}, payload is ${payload.length} bytes`);
          if (r.type === "response" && parsed.headers.get("Transfer-Encoding") !== null) bad("response keeps a Transfer-Encoding header");
        }
        if (!payloadDigest) {
          if (r.type === "response") bad("no WARC-Payload-Digest");
        } else if (r.type === "revisit" && (h.get("WARC-Profile") || "").endsWith("/identical-payload-digest")) {
          // The digest is the earlier record's payload's, which this record leaves out.
          if (payload.length !== 0) bad(`an identical-payload-digest revisit carries ${payload.length} payload bytes`);
          if (!/^[A-Za-z0-9-]+:[A-Za-z0-9=]+$/.test(payloadDigest)) bad(`malformed WARC-Payload-Digest ${show(payloadDigest)}`);
        } else {
          const why = digestMismatch(payloadDigest, payload);
          if (why) bad(`WARC-Payload-Digest mismatch: ${why}`);
          else stats.payloadDigests++;
        }
      } else if (r.type === "response") bad("response record with an empty block");
      else if (!isHTTP && payloadDigest) {
        const why = digestMismatch(payloadDigest, block);
        if (why) bad(`WARC-Payload-Digest mismatch: ${why}`);
        else stats.payloadDigests++;
      }
      i++;
    }
  } catch (e) {
    problems.push(`${name}: warcio failed after ${records.length} records: ${e.message}`);
  } finally {
    console.warn = origWarn;
  }
  for (const w of warned) problems.push(`${name}: warcio: ${w}`);

  // Links between records of this file.
  const byID = new Map();
  records.forEach((r, i) => r.id && byID.set(r.id, { r, i }));
  records.forEach((r, i) => {
    for (const to of r.concurrent) {
      const t = byID.get(to);
      if (!t) {
        problem(i, r, `WARC-Concurrent-To ${to}: ${allIDs.has(to) ? `in another file (${allIDs.get(to)})` : "no such record in this file"}`);
      } else if (!t.r.concurrent.includes(r.id)) {
        problem(i, r, `WARC-Concurrent-To ${to}: that record does not point back`);
      } else if (t.r.uri !== r.uri) {
        problem(i, r, `WARC-Concurrent-To ${to}: target URIs differ (${t.r.uri})`);
      } else stats.pairs++;
    }
    if (r.type === "conversion" && r.refersTo) {
      const t = byID.get(r.refersTo);
      if (!t) problem(i, r, `WARC-Refers-To ${r.refersTo}: no such record in this file`);
      else if (t.r.type !== "response" && t.r.type !== "revisit") problem(i, r, `WARC-Refers-To ${r.refersTo}: a ${t.r.type} record, want the response`);
      else if (t.r.uri !== r.uri) problem(i, r, `WARC-Refers-To ${r.refersTo}: target URIs differ (${t.r.uri})`);
      else if (t.i > i) problem(i, r, `WARC-Refers-To ${r.refersTo}: written after the conversion`);
      else stats.refers++;
    }
    if (r.warcinfo) {
      const t = byID.get(r.warcinfo);
      if (!t || t.r.type !== "warcinfo") problem(i, r, `WARC-Warcinfo-ID ${r.warcinfo} is not a warcinfo record of this file`);
    }
  });
  if (records.length === 0) problems.push(`${name}: no records`);
  else if (records[0].type !== "warcinfo") problems.push(`${name}: first record is ${records[0].type}, want warcinfo`);

  // Pass 2: the gzip framing, with Node's zlib: one record per member.
  let fd;
  try {
    fd = openSync(path, "r");
    const size = fstatSync(fd).size;
    let n = 0;
    for (const m of gzipMembers(fd, size)) {
      const r = records[n];
      const text = m.data.subarray(0, 10).toString("latin1");
      const hdrEnd = m.data.indexOf(CRLFCRLF);
      if (!r) problems.push(`${name}: gzip member ${n} at byte ${m.start} holds no record warcio saw`);
      else if (!text.startsWith("WARC/") || hdrEnd < 0 || r.cl < 0 || m.data.length !== hdrEnd + 4 + r.cl + 4 || !m.data.subarray(m.data.length - 4).equals(CRLFCRLF)) {
        problem(n, r, `gzip member at bytes ${m.start}-${m.end} does not hold exactly this one record`);
      } else if (n === 0 && r.type === "warcinfo") {
        const fn = /\r\nWARC-Filename: *([^\r\n]*)\r\n/i.exec(m.data.subarray(0, hdrEnd + 2).toString("utf8"));
        if (!fn || fn[1] !== name) problem(n, r, `WARC-Filename ${fn ? JSON.stringify(fn[1]) : "missing"}, want ${JSON.stringify(name)}`);
      }
      n++;
    }
    if (n < records.length) problems.push(`${name}: ${n} gzip members for ${records.length} records`);
  } catch (e) {
    problems.push(`${name}: ${e.message}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return { name, stats, problems };
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node check.mjs FILE.warc.gz...");
  process.exit(2);
}
const allIDs = new Map();
let total = 0, totalRecords = 0;
for (const f of files) {
  const { name, stats, problems } = await checkFile(f, allIDs);
  const types = Object.entries(stats.types).map(([t, n]) => `${n} ${t}`).join(", ");
  console.log(`${problems.length ? "FAIL" : "ok  "} ${name}: ${stats.records} records (${types || "none"}); ` +
    `${stats.blockDigests} block and ${stats.payloadDigests} payload digests verified; ` +
    `${stats.pairs} concurrent links; ${stats.refers} conversions referring to their response; ${problems.length} problems`);
  for (const p of problems.slice(0, MAX_LISTED)) console.log(`  ${p}`);
  if (problems.length > MAX_LISTED) console.log(`  ... and ${problems.length - MAX_LISTED} more`);
  total += problems.length;
  totalRecords += stats.records;
}
console.log(`warc-check (warcio.js): ${files.length} files, ${totalRecords} records, ${total} problems`);
process.exit(total ? 1 : 0);
