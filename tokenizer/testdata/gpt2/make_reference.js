// Writes gpt2_reference.json: what the gpt-3-encoder npm package (our
// reference GPT-2 tokenizer) says about corpus.json. Run by make_fixtures.sh:
//   node make_reference.js PACKAGE_DIR corpus.json gpt2_reference.json
'use strict';
const fs = require('fs');
const path = require('path');

const [packageDir, corpusPath, outPath] = process.argv.slice(2);
const encoder = require(path.resolve(packageDir, 'Encoder.js'));
const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json')));
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf-8'));
const vocab = JSON.parse(fs.readFileSync(path.join(packageDir, 'encoder.json')));
const EOT = '<|endoftext|>';
const eotId = vocab[EOT];

// With special tokens parsed, a tokenizer splits the text at each special
// token and encodes the parts on their own.
function encodeSpecial(text) {
  const ids = [];
  text.split(EOT).forEach((part, i) => {
    if (i > 0) ids.push(eotId);
    if (part.length > 0) ids.push(...encoder.encode(part));
  });
  return ids;
}

// Deterministic pseudo-random id sequences (a 32-bit LCG), decoded by the
// reference, whose TextDecoder turns ill-formed UTF-8 into U+FFFD.
let state = 12345;
function next(n) {
  state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
  return state % n;
}
const decode = [];
for (let i = 0; i < 300; i++) {
  const ids = [];
  const length = 1 + next(6);
  for (let j = 0; j < length; j++) {
    // Half the ids from the byte tokens' region (ids < 256 are single bytes),
    // so that characters get split and broken often.
    ids.push(next(2) === 0 ? next(256) : next(Object.keys(vocab).length));
  }
  decode.push({ids, text: encoder.decode(ids)});
}

const out = {
  generator: `make_reference.js with ${pkg.name}@${pkg.version}, node ${process.version}`,
  encode: corpus.map(text => encoder.encode(text)),
  encode_special: corpus.map(encodeSpecial),
  decode,
};
fs.writeFileSync(outPath, JSON.stringify(out) + '\n');
