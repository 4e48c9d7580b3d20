// The reference tokenizers of tests/bpe_parity.py, from npm (tests/package.json, installed into
// build/npm by make llama-oracle):
//
//   node tests/bpe_reference.cjs NODE_MODULES hf TOKENIZER.json CORPUS
//       @huggingface/tokenizers (Hugging Face's tokenizers in JS) on the tokenizer.json:
//       encode(text, {add_special_tokens: false}), which cuts out every added token
//   node tests/bpe_reference.cjs NODE_MODULES gpt-3-encoder CORPUS
//       gpt-3-encoder's encode (GPT-2's own encoder.py in JS; no added tokens)
//
// CORPUS holds one string a line as the hex of its UTF-8 bytes ("-" for the empty string); each
// gives one line of ids, space separated. Errors: a message on stderr, exit 1.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [modules, kind, ...rest] = process.argv.slice(2);
const load = createRequire(path.join(path.resolve(modules), "noop.js"));

function readCorpus(file) {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }); // keeps a U+FEFF
  return fs.readFileSync(file, "ascii").split("\n").slice(0, -1)
    .map((line) => (line === "-" ? "" : decoder.decode(Buffer.from(line, "hex"))));
}

let encode, corpusFile;
if (kind === "hf" && rest.length === 2) {
  const { Tokenizer } = load("@huggingface/tokenizers");
  const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(rest[0], "utf-8")), {});
  encode = (text) => tokenizer.encode(text, { add_special_tokens: false }).ids;
  corpusFile = rest[1];
} else if (kind === "gpt-3-encoder" && rest.length === 1) {
  encode = load("gpt-3-encoder").encode;
  corpusFile = rest[0];
} else {
  process.stderr.write("usage: bpe_reference.cjs NODE_MODULES hf TOKENIZER.json CORPUS | " +
    "gpt-3-encoder CORPUS\n");
  process.exit(1);
}
process.stdout.write(readCorpus(corpusFile).map((text) => encode(text).join(" ") + "\n").join(""));
