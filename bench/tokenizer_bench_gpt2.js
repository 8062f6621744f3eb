// One run of the GPT-2 reference for bench/tokenizer_bench.sh: the
// gpt-3-encoder npm package (the one tokenizer/testdata/gpt2/reference.json
// comes from) on the benchmark's documents, as JSON on stdout.
//   node tokenizer_bench_gpt2.js PACKAGE_DIR DOCS_DIR NAME
// One corpus per process: the package's BPE cache, a module global, starts
// empty.
'use strict';
const fs = require('fs');
const path = require('path');

const [packageDir, docsDir, name] = process.argv.slice(2);
const encoder = require(path.resolve(packageDir, 'Encoder.js'));
const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json')));

function readDocs(name, suffix) {
  return JSON.parse(
      fs.readFileSync(path.join(docsDir, `${name}.${suffix}.json`), 'utf-8'));
}

function pass(bytes, tokens, seconds) {
  return {bytes, tokens, seconds, mb_per_s: bytes / seconds / 1e6};
}

function timeEncode(docs, ids) {
  ids.length = 0;
  let bytes = 0;
  let tokens = 0;
  const start = process.hrtime.bigint();
  for (const doc of docs) {
    const docIds = encoder.encode(doc);
    tokens += docIds.length;
    ids.push(docIds);
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  for (const doc of docs) bytes += Buffer.byteLength(doc, 'utf8');
  return pass(bytes, tokens, seconds);
}

function timeDecode(ids) {
  const texts = [];
  let tokens = 0;
  const start = process.hrtime.bigint();
  for (const docIds of ids) {
    texts.push(encoder.decode(docIds));
    tokens += docIds.length;
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  let bytes = 0;
  for (const text of texts) bytes += Buffer.byteLength(text, 'utf8');
  return pass(bytes, tokens, seconds);
}

const ids = [];
const run = {corpus: name};
run.encode_cold = timeEncode(readDocs(name, 'unique'), ids);
run.encode_warm = timeEncode(readDocs(name, 'repeated'), ids);
run.decode = timeDecode(ids);
run.generator = `${pkg.name}@${pkg.version}, node ${process.version}`;
process.stdout.write(JSON.stringify(run) + '\n');
