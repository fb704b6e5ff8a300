// Text data for the language models: a real corpus (Debian's fortunes), packing token streams
// into fixed-length sequences, a deterministic train/validation split and the unigram
// baseline perplexity; generated token ids for throughput runs; BERT's masked-LM and
// next-sentence pairs; and SQuAD v1.1 question-answering features. Same seed, same data.
#pragma once

#include <ipuml/core/config.hpp>
#include <ipuml/datasets/wordpiece.hpp>
#include <ipuml/tensor/ops.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ipuml::datasets {

// ---- Corpus ---------------------------------------------------------------------------------

// The directory of fortune files: `hint` (if non-empty), else /usr/share/games/fortunes (the
// Debian packages fortunes-min and fortunes; scripts/install-deps.sh installs them).
std::string find_fortunes_dir(const std::string& hint = "");
// Every fortune of every plain file in `dir` (files in name order; *.dat indexes, *.u8 links
// and subdirectories skipped), split at the "%" lines, trimmed, empty ones dropped.
std::vector<std::string> read_fortunes(const std::string& dir);

// Document i goes to validation when i % every == every - 1 (every >= 2), else to training.
struct DocumentSplit {
  std::vector<std::string> train, validation;
};
DocumentSplit split_documents(const std::vector<std::string>& documents, int64_t every = 20);

// The documents' tokens one after another, `separator` (e.g. GPT-2's <|endoftext|>) after
// each one when >= 0.
std::vector<int64_t> tokenize_documents(
    const std::vector<std::string>& documents,
    const std::function<std::vector<int64_t>(std::string_view)>& encode, int64_t separator);

// Non-overlapping rows of `length` tokens (a model's max_len + 1 for next-token prediction),
// the tail that does not fill a row dropped: int64 [tokens.size() / length, length].
Tensor pack_sequences(const std::vector<int64_t>& tokens, int64_t length);

// Unigram model of the training tokens with add-one (Laplace) smoothing over the vocabulary:
// p(t) = (count(t) + 1) / (N + V). The baseline a language model must beat.
class UnigramModel {
 public:
  UnigramModel(const std::vector<int64_t>& train_tokens, int64_t vocab_size);
  double log_prob(int64_t token) const;
  // exp(-mean log p) over the tokens a next-token model predicts in `packed` [N, L]: every
  // column but the first of each row.
  double perplexity(const Tensor& packed) const;

 private:
  std::vector<int64_t> counts_;
  int64_t total_ = 0;
};

// Graphcore's --dataset generated: uniformly random ids in [1, vocab_size), [rows, length].
Tensor generated_tokens(int64_t rows, int64_t length, int64_t vocab_size, uint64_t seed);

// ---- BERT pre-training ----------------------------------------------------------------------

// Sentences of a document: whitespace collapsed, cut after . ! ? followed by a space.
std::vector<std::string> split_sentences(std::string_view document);

struct MlmOptions {
  double mask_prob = 0.15;      // fraction of non-special tokens predicted (at least one)
  int64_t max_predictions = 0;  // cap per sequence; 0: none
};

// BERT's masking of one sequence in place: round(mask_prob x candidates) positions among those
// whose token is not special (by `is_special`), each replaced by [MASK] 80 % of the time, by a
// random id in [0, vocab_size) 10 %, kept 10 %; labels are the original ids there, -100
// elsewhere. `stream` and `counter` make it deterministic from a seed.
void mask_tokens(std::vector<int64_t>& ids, std::vector<int64_t>& labels,
                 const std::function<bool(int64_t)>& is_special, int64_t mask_id,
                 int64_t vocab_size, uint64_t seed, uint64_t stream,
                 const MlmOptions& options = {});

// BERT pre-training inputs: [B, S] int64 each, and nsp_labels [B] (0: B follows A, 1: random).
struct BertPretrainingData {
  Tensor input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels;
  int64_t size() const { return input_ids.defined() ? input_ids.size(0) : 0; }
};

// Next-sentence pairs from consecutive sentences of each document ([CLS] A [SEP] B [SEP],
// padded to max_len): half of them (by a coin per pair) get a random sentence of another
// document as B instead. The pair is cut to fit from the end of the longer part. Then masked.
BertPretrainingData make_bert_pretraining(const std::vector<std::string>& documents,
                                          const BertTokenizer& tokenizer, int64_t max_len,
                                          uint64_t seed, const MlmOptions& options = {});
// Random ids for throughput runs, laid out as real pairs ([CLS] at 0, [SEP]s, two segments).
BertPretrainingData generated_bert_pretraining(int64_t rows, int64_t max_len, int64_t vocab_size,
                                               uint64_t seed);

// ---- SQuAD v1.1 -----------------------------------------------------------------------------

struct SquadExample {
  std::string id, question, context;
  std::string answer_text;    // the first answer ("" when there is none)
  int64_t answer_start = -1;  // in characters (code points) of the context
};
// {"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers":
// [{"text", "answer_start"}]}]}]}]}. Throws ipuml::Error naming the file and the field.
std::vector<SquadExample> read_squad(const std::string& path);

struct SquadOptions {
  int64_t max_seq_len = 384;
  int64_t doc_stride = 128;
  int64_t max_query_len = 64;
};
// run_squad.py's features: [CLS] question [SEP] window of the context [SEP], one feature per
// window of the context (windows doc_stride apart), start/end the answer's token positions in
// the feature, or 0 ([CLS]) when the answer is not inside the window.
struct SquadFeatures {
  Tensor input_ids, token_type_ids, attention_mask, start_positions, end_positions;
  std::vector<int64_t> example_index;  // which example each feature came from
  int64_t size() const { return static_cast<int64_t>(example_index.size()); }
};
SquadFeatures squad_features(const std::vector<SquadExample>& examples,
                             const BertTokenizer& tokenizer, const SquadOptions& options = {});

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/text_data_impl.hpp>
#endif
