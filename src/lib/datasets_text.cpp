// Compiled-mode home of the text tokenizers' and text data sets' bodies (ipuml::ipuml).
#include <ipuml/datasets/unicode.hpp>
#include <ipuml/datasets/unicode_impl.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/gpt2_bpe_impl.hpp>
#include <ipuml/datasets/wordpiece.hpp>
#include <ipuml/datasets/wordpiece_impl.hpp>
#include <ipuml/datasets/text_data.hpp>
#include <ipuml/datasets/text_data_impl.hpp>
